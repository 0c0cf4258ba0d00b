// Whether this process is in the foreground process group of its
// controlling terminal: there, a Ctrl-C (SIGINT) is the terminal's, sent
// by the kernel to every process of the group, CMD included. Read from
// /proc/self/stat (fields 5, pgrp, and 8, tpgid: the terminal's foreground
// group, -1 without a terminal) at the moment a signal arrives, since a
// shell may move a job between foreground and background meanwhile.
import { readFileSync } from 'node:fs';

export function inTerminalForeground(): boolean {
  let stat: string;
  try {
    stat = readFileSync('/proc/self/stat', 'latin1');
  } catch {
    return false;
  }
  // The command name (field 2) is in parentheses and may hold spaces or
  // parentheses itself: the fields after it start after the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state): pgrp is rest[2], tpgid rest[5].
  const pgrp = Number(rest[2]);
  const tpgid = Number(rest[5]);
  return Number.isInteger(pgrp) && pgrp > 0 && tpgid === pgrp;
}
