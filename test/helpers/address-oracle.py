# Second opinion from Python's ipaddress: one address a line on stdin, one
# verdict a line on stdout: "G" (global) or "N:<why>" (not global). IPv6
# forms Python itself knows to embed IPv4 (ipv4_mapped, sixtofour, teredo
# client) are judged by that IPv4 address.
import ipaddress, sys

def v4(a):
    why = [n for n in ('is_private', 'is_multicast', 'is_reserved', 'is_loopback', 'is_link_local', 'is_unspecified') if getattr(a, n)]
    if not a.is_global: why.append('not is_global')
    return why

def judge(text):
    a = ipaddress.ip_address(text)
    if a.version == 4:
        return v4(a)
    for name, inner in (('mapped', a.ipv4_mapped), ('6to4', a.sixtofour), ('teredo', a.teredo[1] if a.teredo else None)):
        if inner is not None:
            return [f'{name} {inner}: {w}' for w in v4(inner)]
    why = [n for n in ('is_private', 'is_multicast', 'is_reserved', 'is_loopback', 'is_link_local', 'is_site_local', 'is_unspecified') if getattr(a, n)]
    if not a.is_global: why.append('not is_global')
    return why

out = []
for line in sys.stdin:
    line = line.strip()
    if not line: continue
    w = judge(line)
    out.append('N:' + ','.join(w) if w else 'G')
sys.stdout.write('\n'.join(out) + '\n')
