# Other parsers' reading of URL host texts: one JSON string a line on stdin,
# one JSON object a line on stdout with what glibc's inet_aton and
# getaddrinfo(AI_NUMERICHOST) make of it (brackets stripped, and again
# percent-decoded), as dotted quad / IPv6 text, or null.
import json, socket, sys, urllib.parse

def aton(h):
    try:
        return socket.inet_ntoa(socket.inet_aton(h))
    except (OSError, UnicodeError, ValueError):
        return None

def gai(h):
    try:
        r = socket.getaddrinfo(h, None, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
        return r[0][4][0].split('%')[0]
    except (OSError, UnicodeError, ValueError):
        return None

for line in sys.stdin:
    host = json.loads(line)
    bare = host[1:-1] if host.startswith('[') and host.endswith(']') else host
    texts = {bare, urllib.parse.unquote(bare)}
    out = set()
    for h in texts:
        if '\x00' in h:
            continue
        for f in (aton, gai):
            a = f(h)
            if a:
                out.add(a)
    print(json.dumps(sorted(out)))
