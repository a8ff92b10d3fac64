"""The corpus of the URL rule: every spelling the rule (docs/participants.md, "the URL rule") takes or refuses.

`cases(seed)` gives Cases whose args are (template,): a URL in which "{port}" stands for the grader's
listening trap (a refused URL must never reach it) and "{closed}" for a loopback port nothing listens on
(a taken URL must be tried there, and fail as a DeliveryError). `url_of(case, port, closed)` fills them in;
`reference_outcome(url)` is the rule, written from its text: exactly http://HOST[:PORT]/events, HOST
`localhost` in any ASCII letter case, 127.a.b.c of decimal numbers 0-255 without leading zeros, or [::1];
PORT 1-65535 without leading zeros; anything else is a ValueError before any socket or name lookup.
The classes follow RFC 3986 and WHATWG URL parsing forms, and the leniencies of Python's own parsers
(urllib.parse, ipaddress, int(), str.isdigit, str.lower and casefold).
"""
import re

from . import numbered, raises, rng

_FORM = re.compile(r"http://(?P<host>\[::1\]|[A-Za-z]+|[0-9.]+)(?::(?P<port>[0-9]*))?/events\Z")
_OCTET = re.compile(r"(?:0|[1-9][0-9]{0,2})\Z")
_PORT = re.compile(r"[1-9][0-9]{0,4}\Z")
SEEDED = 120

# The classic cases, first and in this order: the mutants of the kit name the first one they let through.
CLASSIC = (
    ("not-loopback", "http://10.0.0.1:9/events"), ("dns-name", "http://example.invalid/events"),
    ("scheme", "https://127.0.0.1/events"), ("path", "http://127.0.0.1:{port}/other"),
    ("userinfo", "http://user@127.0.0.1:{port}/events"), ("query", "http://127.0.0.1:{port}/events?x=1"),
    ("fragment", "http://127.0.0.1:{port}/events#top"), ("scheme", "ftp://127.0.0.1:{port}/events"),
    ("path", "http://127.0.0.1:{port}/events/"), ("ipv4-leading-zero", "http://127.000.0.1:{port}/events"),
    ("ipv4-range", "http://127.0.0.256:{port}/events"), ("ipv4-short-form", "http://127.1:{port}/events"),
    ("port-empty", "http://127.0.0.1:/events"), ("port-range", "http://127.0.0.1:0/events"),
    ("port-range", "http://127.0.0.1:65536/events"), ("port-leading-zero", "http://127.0.0.1:0{port}/events"),
    ("localhost-case", "http://LOCALHOST:{closed}/events"), ("ipv4-loopback", "http://127.0.0.1:{closed}/events"),
    ("ipv4-loopback", "http://127.1.2.3:{closed}/events"), ("ipv6-loopback", "http://[::1]:{closed}/events"),
)
TAKEN_HOSTS = (("localhost-case", "localhost"), ("localhost-case", "LocalHost"), ("localhost-case", "lOCALHOST"),
               ("ipv4-loopback", "127.0.0.0"), ("ipv4-loopback", "127.255.255.255"), ("ipv4-loopback", "127.10.0.1"),
               ("ipv4-loopback", "127.0.100.9"), ("ipv6-loopback", "[::1]"))
REFUSED_HOSTS = (
    ("ipv6-spelling", "[0:0:0:0:0:0:0:1]"), ("ipv6-spelling", "[::0001]"), ("ipv6-spelling", "[0::1]"),
    ("ipv6-spelling", "[::01]"), ("ipv6-spelling", "[0000::1]"), ("ipv6-spelling", "[::ffff:127.0.0.1]"),
    ("ipv6-spelling", "[::ffff:7f00:1]"), ("ipv6-spelling", "[::1%25lo]"), ("ipv6-spelling", "[::1%lo]"),
    ("ipv6-spelling", "::1"), ("ipv6-spelling", "[::1"), ("ipv6-spelling", "[[::1]]"), ("ipv6-spelling", "[::]"),
    ("ipv6-spelling", "[::2]"), ("ipv6-spelling", "[0:0::0:1]"), ("ipv6-spelling", "[::127.0.0.1]"),
    ("ipv4-leading-zero", "127.0.0.01"), ("ipv4-leading-zero", "0127.0.0.1"), ("ipv4-leading-zero", "127.00.0.1"),
    ("ipv4-leading-zero", "127.0.00.1"), ("ipv4-leading-zero", "127.0.0.001"),
    ("ipv4-range", "127.256.0.1"), ("ipv4-range", "127.0.0.1000"), ("ipv4-range", "128.0.0.1"),
    ("ipv4-range", "126.255.255.255"), ("ipv4-range", "0.0.0.0"), ("ipv4-range", "127.0.0.-1"),
    ("ipv4-short-form", "127.0.1"), ("ipv4-short-form", "2130706433"), ("ipv4-short-form", "0x7f.0.0.1"),
    ("ipv4-short-form", "0x7f000001"), ("ipv4-short-form", "017700000001"), ("ipv4-short-form", "127.0.0.1."),
    ("ipv4-short-form", "127..0.1"), ("ipv4-short-form", "127.0.0.1.1"), ("ipv4-short-form", "127"),
    ("host-non-ascii-digit", "127.0.0.\u0661"), ("host-non-ascii-digit", "\uff11\uff12\uff17.0.0.1"),
    ("host-non-ascii-digit", "127.0.0.\U0001d7cf"), ("host-non-ascii-digit", "127.\u00b9.0.1"),
    ("host-non-ascii-letter", "localho\u017ft"), ("host-non-ascii-letter", "\uff4cocalhost"),
    ("host-non-ascii-letter", "local\u0570ost"), ("host-non-ascii-letter", "xn--localhost"),
    ("host-prefix", "127.0.0.1.nip.io"), ("host-prefix", "127.0.0.1evil"), ("host-prefix", "localhost.example"),
    ("host-prefix", "localhostx"), ("host-prefix", "localhost."), ("host-prefix", "127.0.0.1-evil"),
    ("host-prefix", "localhost-evil.invalid"), ("host-prefix", "[::1].invalid"),
    ("dns-name", "loopback"), ("dns-name", "ip6-localhost"), ("dns-name", "localhost6"), ("dns-name", "local"),
    ("escape", "%6cocalhost"), ("escape", "127.0.0.1%2e"), ("escape", "%31%32%37.0.0.1"),
    ("not-loopback", "192.168.1.1"), ("not-loopback", "169.254.0.1"), ("not-loopback", "[fe80::1]"),
    ("empty-host", ""),
)
TAKEN_PORTS = (("port-edge", "1"), ("port-edge", "65535"), ("port-edge", None), ("port-edge", "{closed}"))
REFUSED_PORTS = (
    ("port-leading-zero", "01"), ("port-leading-zero", "080"), ("port-leading-zero", "0080"),
    ("port-leading-zero", "00"), ("port-leading-zero", "065535"), ("port-range", "0"), ("port-range", "65536"),
    ("port-range", "99999"), ("port-range", "100000"), ("port-range", "-1"), ("port-range", "+80"),
    ("port-empty", ""), ("port-non-ascii-digit", "\u0668\u0660"), ("port-non-ascii-digit", "\uff18\uff10"),
    ("port-non-ascii-digit", "8\u0660"), ("port-non-ascii-digit", "\u00b9"), ("port-not-number", "http"),
    ("port-not-number", "0x50"), ("port-not-number", "80.0"), ("port-not-number", "1e3"),
    ("port-not-number", " 80"), ("port-not-number", "80 "), ("port-not-number", "8_0"),
    ("port-not-number", "80:80"),
)
REFUSED_FORMS = (
    ("whitespace", "http://127.0.0.1:{port}/events "), ("whitespace", "http://127.0.0.1:{port}/events\n"),
    ("whitespace", "http://127.0.0.1:{port}/events\r\n"), ("whitespace", "http://127.0.0.1:{port}/events\t"),
    ("whitespace", " http://127.0.0.1:{port}/events"), ("whitespace", "\nhttp://127.0.0.1:{port}/events"),
    ("whitespace", "http://127.0.0.1 :{port}/events"), ("whitespace", "http:// 127.0.0.1:{port}/events"),
    ("whitespace", "http://127.0.0.1:{port}/ events"), ("whitespace", "http://127.0.0.1:{port}/events\x00"),
    ("whitespace", "http://127.0.0.1:{port}/events\u00a0"), ("whitespace", "http://127.0.0.1:{port}/events\u3000"),
    ("whitespace", "http://127.0.0.1:{port}/even ts"), ("whitespace", "http://127.0.0.1:{port}/events\x0b"),
    ("scheme", "HTTPS://127.0.0.1:{port}/events"), ("scheme", "http:/127.0.0.1:{port}/events"),
    ("scheme", "http:127.0.0.1:{port}/events"), ("scheme", "//127.0.0.1:{port}/events"),
    ("scheme", "127.0.0.1:{port}/events"), ("scheme", "htp://127.0.0.1:{port}/events"),
    ("scheme", "http:\\\\127.0.0.1:{port}/events"), ("scheme", "http:///127.0.0.1:{port}/events"),
    ("scheme", "file://127.0.0.1:{port}/events"), ("scheme", "ws://127.0.0.1:{port}/events"),
    ("path", "http://127.0.0.1:{port}"), ("path", "http://127.0.0.1:{port}/"), ("path", "http://127.0.0.1:{port}/Events"),
    ("path", "http://127.0.0.1:{port}/EVENTS"), ("path", "http://127.0.0.1:{port}/event"),
    ("path", "http://127.0.0.1:{port}/events/x"), ("path", "http://127.0.0.1:{port}//events"),
    ("path", "http://127.0.0.1:{port}/./events"), ("path", "http://127.0.0.1:{port}/x/../events"),
    ("path", "http://127.0.0.1:{port}/%65vents"), ("path", "http://127.0.0.1:{port}/events%2F"),
    ("path", "http://127.0.0.1:{port}/events;x"), ("path", "http://127.0.0.1:{port}\\events"),
    ("path", "http://127.0.0.1:{port}/events\\"), ("path", "http://127.0.0.1:{port}/eventsx"),
    ("query", "http://127.0.0.1:{port}/events?"), ("query", "http://127.0.0.1:{port}/events?a=1&b=2"),
    ("fragment", "http://127.0.0.1:{port}/events#"), ("fragment", "http://127.0.0.1:{port}/events?#"),
    ("userinfo", "http://@127.0.0.1:{port}/events"), ("userinfo", "http://:@127.0.0.1:{port}/events"),
    ("userinfo", "http://user:pw@127.0.0.1:{port}/events"), ("userinfo", "http://127.0.0.1@127.0.0.1:{port}/events"),
    ("userinfo", "http://127.0.0.1:{port}@example.invalid/events"),
    ("userinfo", "http://127.0.0.1\\@example.invalid:{port}/events"),
    ("not-a-str", None),
)


def reference_outcome(url):
    """What the rule makes of `url`: raises("ValueError") before any socket, or tries(the port to connect to)."""
    match = _FORM.match(url) if isinstance(url, str) else None
    if match is None:
        return raises("ValueError")
    host, port = match.group("host"), match.group("port")
    if port is not None and not (_PORT.match(port) and int(port) <= 65535):
        return raises("ValueError")
    if host.lower() == "localhost" or host == "[::1]":
        return tries(port)
    octets = host.split(".")
    if len(octets) == 4 and all(_OCTET.match(o) for o in octets) and octets[0] == "127" and \
            all(int(o) <= 255 for o in octets):
        return tries(port)
    return raises("ValueError")


def tries(port):
    """The expected outcome of a URL the rule takes: send_http connects to loopback on that port (80 if absent)."""
    return {"kind": "tries", "port": 80 if port is None else int(port)}


def url_of(case, port, closed):
    """The case's URL with the trap's port and the closed port filled in (None stays None)."""
    template = case.args[0]
    if template is None:
        return None
    return template.replace("{port}", str(port)).replace("{closed}", str(closed))


def compose(host, port):
    return "http://%s%s/events" % (host, "" if port is None else ":" + port)


def boundary():
    out = [(cls, (url,), None) for cls, url in CLASSIC]
    for cls, host in REFUSED_HOSTS:
        out.append((cls, (compose(host, "{port}"),), None))
    for cls, port in REFUSED_PORTS:
        out.append((cls, (compose("127.0.0.1", port),), None))
    out.extend((cls, (url,), None) for cls, url in REFUSED_FORMS)
    for cls, host in TAKEN_HOSTS:
        out.append((cls, (compose(host, "{closed}"),), None))
    for cls, port in TAKEN_PORTS:
        out.append((cls, (compose("127.0.0.1", port),), None))
    return out


def seeded(seed):
    """SEEDED URLs from a random taken or refused host, port and form: the class is the first part refused."""
    r = rng(seed, "urls")
    out = []
    for _ in range(SEEDED):
        host_cls, host = r.choice(TAKEN_HOSTS if r.random() < 0.5 else REFUSED_HOSTS)
        port_cls, port = r.choice(TAKEN_PORTS[2:] if r.random() < 0.6 else REFUSED_PORTS)
        refused_host, refused_port = (host_cls, host) in REFUSED_HOSTS, (port_cls, port) in REFUSED_PORTS
        if port == "{closed}" and refused_host:
            port = "{port}"  # a refused URL names the trap, never the closed port
        url = compose(host, port)
        cls = port_cls if refused_port and not refused_host else host_cls
        out.append((cls, (url,), None))
    return out


def cases(seed):
    return numbered(boundary(), seeded(seed))


CLASSES = tuple(sorted({cls for cls, _ in CLASSIC + TAKEN_HOSTS + REFUSED_HOSTS + TAKEN_PORTS + REFUSED_PORTS
                        + REFUSED_FORMS}))
