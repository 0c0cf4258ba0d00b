// A list of callbacks told about one kind of event, in the order they were
// added.
export class Listeners<T> {
  private readonly fs: ((value: T) => void)[] = [];

  add(f: (value: T) => void): void {
    this.fs.push(f);
  }

  emit(value: T): void {
    for (const f of this.fs) f(value);
  }
}
