# test_ops_files.py - checks deploy/systemd/, deploy/docker/compose.yaml, docs/install.md and docs/docker.md against slotd's options and the Dockerfile (run: /usr/bin/python3 -m unittest discover -s tests/deploy).
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import unittest

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
UNIT = os.path.join(REPO, "deploy", "systemd", "slotd.service")
ENV_FILE = os.path.join(REPO, "deploy", "systemd", "slotd.default")
COMPOSE = os.path.join(REPO, "deploy", "docker", "compose.yaml")
DOCKERFILE = os.path.join(REPO, "Dockerfile")
INSTALL_MD = os.path.join(REPO, "docs", "install.md")
DOCKER_MD = os.path.join(REPO, "docs", "docker.md")
DOCS = (INSTALL_MD, DOCKER_MD)
MAIN_C = os.path.join(REPO, "service", "main.c")
NOTIFY_WAIT_S = 20  # bound on slotd starting (READY=1) and on its shutdown (STOPPING=1)
# SLOTD_* names the docs may use that are not slotd options: slotctl's default endpoints.
CLIENT_ENV = {"SLOTD_ENDPOINTS"}
# Words before the program a shell command runs.
PREFIX_WORDS = {"sudo", "exec", "env", "nohup", "do", "then", "else", "time"}


def slotd_bin():
    return os.environ.get("SLOTD_BIN", os.path.join(REPO, "build", "bin", "slotd"))


def slotctl_bin():
    return os.path.join(os.path.dirname(slotd_bin()), "slotctl")


_help_cache = {}


def help_text(path):
    """`path --help` (stdout), or a skip when the program is not built."""
    if path not in _help_cache:
        if not os.access(path, os.X_OK):
            raise unittest.SkipTest("not built: %s (set SLOTD_BIN)" % path)
        r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10)
        if r.returncode != 0:
            raise AssertionError("%s --help exited %d: %s" % (path, r.returncode, r.stderr))
        _help_cache[path] = r.stdout
    return _help_cache[path]


def slotd_options():
    """(flags, env names) from `slotd --help`: rows '  --name  SLOTD_NAME  help (default x)'."""
    flags, env = set(), set()
    for line in help_text(slotd_bin()).splitlines():
        m = re.match(r"^\s+(--[a-z0-9-]+)(?:\s+(SLOTD_[A-Z0-9_]+))?\s", line)
        if m:
            flags.add(m.group(1))
            if m.group(2):
                env.add(m.group(2))
    return flags, env


def slotd_default(flag):
    """The '(default X)' slotd --help gives flag."""
    for line in help_text(slotd_bin()).splitlines():
        if re.match(r"^\s+%s\s" % re.escape(flag), line):
            return re.search(r"\(default ([^)]*)\)\s*$", line).group(1)
    raise AssertionError("%s not in slotd --help" % flag)


def slotctl_flags():
    return set(re.findall(r"--[a-z][a-z0-9-]*", help_text(slotctl_bin())))


def shutdown_transfer_s():
    """SHUTDOWN_TRANSFER_MS of service/main.c (how long SIGTERM waits for hand-offs), in s."""
    with open(MAIN_C) as f:
        m = re.search(r"#define SHUTDOWN_TRANSFER_MS (\d+)", f.read())
    return int(m.group(1)) / 1000.0


def seconds(v):
    """'30s', '1min 30s', '90' (systemd and compose durations) in seconds."""
    total, units = 0.0, {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", str(v)):
        total += float(num) * units[unit or "s"]
    return total


def flag_name(tok):
    return tok.split("=", 1)[0]


def flags_of(args):
    """{'--flag': value} of an argument list ('--a=b' or '--a b')."""
    out, i = {}, 0
    while i < len(args):
        a = args[i]
        if "=" in a:
            k, v = a.split("=", 1)
        else:
            k, v = a, args[i + 1] if i + 1 < len(args) else None
            i += 1
        out[k] = v
        i += 1
    return out


# ---- docs: fenced code blocks and the shell commands in them ----

def code_blocks(path):
    """[(language, text)] of the fenced blocks of a Markdown file."""
    with open(path) as f:
        text = f.read()
    return [(m.group(1), m.group(2)) for m in
            re.finditer(r"^```(\w*)\n(.*?)^```\s*$", text, re.M | re.S)]


def shell_commands(block):
    """Each simple command of a shell block as a token list: continuations joined, comments
    dropped, split at ; | && ||."""
    text = block.replace("\\\n", " ")
    cmds = []
    for line in text.splitlines():
        lex = shlex.shlex(line, posix=True, punctuation_chars=";|&")
        lex.whitespace_split = True
        lex.commenters = "#"
        cur = []
        for tok in lex:
            if tok and set(tok) <= set(";|&"):
                if cur:
                    cmds.append(cur)
                cur = []
            else:
                cur.append(tok)
        if cur:
            cmds.append(cur)
    return cmds


def doc_flag_uses(path):
    """[(program, flag, command)] for every --flag given to slotd (directly, or after the image in
    `docker run`) or to slotctl in a shell block of path."""
    uses = []
    for lang, block in code_blocks(path):
        if lang not in ("sh", "bash", "shell", ""):
            continue
        for cmd in shell_commands(block):
            words = [w for w in cmd if not re.match(r"^[A-Z_][A-Z0-9_]*=", w)]
            while words and words[0] in PREFIX_WORDS:
                words = words[1:]
            if not words:
                continue
            prog, rest = os.path.basename(words[0]), None
            if prog in ("slotd", "slotctl"):
                rest = words[1:]
            elif words[:2] == ["docker", "run"]:
                image = [i for i, w in enumerate(words) if w.startswith("slotd:")]
                if image:
                    prog, rest = "slotd", words[image[0] + 1:]
            if rest is not None:
                uses += [(prog, flag_name(t), " ".join(cmd)) for t in rest
                         if t.startswith("--") and t != "--"]
    return uses


def doc_env_names(path):
    """Every SLOTD_NAME a doc mentions (prose and code)."""
    with open(path) as f:
        return set(re.findall(r"\bSLOTD_[A-Z0-9_]*[A-Z0-9]\b", f.read()))


# ---- the unit file ----

def unit_directives(path):
    """{(section, key): [values]} of a systemd unit (no continuation lines in ours)."""
    out, section = {}, None
    with open(path) as f:
        for raw in f:
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            k, _, v = line.partition("=")
            out.setdefault((section, k.strip()), []).append(v.strip())
    return out


def dockerfile_json(instruction):
    """The JSON-array argument of the last ENTRYPOINT or HEALTHCHECK ... CMD of the Dockerfile."""
    with open(DOCKERFILE) as f:
        text = f.read().replace("\\\n", " ")
    lines = [l for l in text.splitlines() if l.startswith(instruction + " ")]
    return json.loads(lines[-1][lines[-1].index("["):])


def entrypoint_flags():
    ep = dockerfile_json("ENTRYPOINT")
    return flags_of(ep[ep.index("slotd") + 1:])


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


def verify(path):
    """systemd-analyze verify of path: (returncode, output lines)."""
    r = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True,
                       timeout=60)
    return r.returncode, [l for l in (r.stdout + r.stderr).splitlines() if l.strip()]


class SystemdUnitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = unit_directives(UNIT)

    def one(self, key, section="Service"):
        v = self.d.get((section, key))
        self.assertIsNotNone(v, "%s= missing in [%s]" % (key, section))
        self.assertEqual(len(v), 1, key)
        return v[0]

    def verify_copy(self, text):
        """A copy of the unit (as text) verified from a temporary directory."""
        if shutil.which("systemd-analyze") is None:
            self.skipTest("systemd-analyze not installed")
        with tempfile.TemporaryDirectory(prefix="slotd-unit-") as tmp:
            path = os.path.join(tmp, "slotd.service")
            with open(path, "w") as f:
                f.write(text)
            rc, lines = verify(path)
        return rc, [l for l in lines if "slotd.service" in l]

    def unit_with_built_binary(self):
        """The unit with ExecStart's /usr/local/bin/slotd replaced by the built slotd (or by
        `true` when slotd is not built: verify checks that the program exists)."""
        exe = os.path.abspath(slotd_bin())
        if not os.access(exe, os.X_OK):
            exe = shutil.which("true")
        with open(UNIT) as f:
            text = f.read()
        self.assertIn("\nExecStart=/usr/local/bin/slotd ", text)
        return text.replace("\nExecStart=/usr/local/bin/slotd ", "\nExecStart=%s " % exe)

    def test_first_line_says_what_it_is(self):
        with open(UNIT) as f:
            self.assertRegex(f.readline(), r"^# slotd\.service - ")

    def test_systemd_analyze_verify(self):
        rc, lines = self.verify_copy(self.unit_with_built_binary())
        self.assertEqual((rc, lines), (0, []))

    def test_verify_catches_a_bad_unit(self):
        # The check above can fail: a misspelt key and a bad value are reported.
        text = self.unit_with_built_binary()
        bad = text.replace("\nPrivateTmp=yes", "\nPrivateTmpp=yes").replace(
            "\nType=notify", "\nType=notifyx")
        self.assertNotEqual(bad, text)
        _, lines = self.verify_copy(bad)
        self.assertTrue(any("PrivateTmpp" in l for l in lines), lines)
        self.assertTrue(any("notifyx" in l for l in lines), lines)

    def test_exec_start(self):
        argv = shlex.split(self.one("ExecStart"))
        self.assertEqual(argv[0], "/usr/local/bin/slotd")
        flags = flags_of(argv[1:])
        # The data directory is the state directory, the one place ProtectSystem=strict leaves
        # writable; a flag, so the environment file cannot point it elsewhere.
        self.assertEqual(flags, {"--data-dir": "${STATE_DIRECTORY}"})
        self.assertEqual(self.one("StateDirectory"), "slotd")
        known, _ = slotd_options()
        self.assertLessEqual(set(flags), known)

    def test_type_notify(self):
        self.assertEqual(self.one("Type"), "notify")
        self.assertEqual(self.one("NotifyAccess"), "main")

    def notify_run(self, address, bind_to):
        """Runs slotd with NOTIFY_SOCKET=address (a datagram socket this test bound at bind_to):
        the messages it sends, each with whether its client port accepted a connection when the
        message arrived; SIGTERM after the first."""
        work = tempfile.mkdtemp(prefix="slotd-notify-")
        self.addCleanup(shutil.rmtree, work, ignore_errors=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(sock.close)
        sock.bind(bind_to)
        sock.settimeout(NOTIFY_WAIT_S)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, NOTIFY_SOCKET=address)
        proc = subprocess.Popen([slotd_bin(), "--data-dir", os.path.join(work, "data"),
                                 "--listen", "127.0.0.1:%d" % port, "--peer-listen", "127.0.0.1:0",
                                 "--metrics-listen", ""], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        got = []
        try:
            for _ in range(2):
                msg = sock.recv(4096).decode()
                with socket.socket() as c:
                    got.append((msg, c.connect_ex(("127.0.0.1", port)) == 0))
                if len(got) == 1:
                    proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=30), 0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return got

    def test_slotd_notifies_ready_then_stopping(self):
        """The sd_notify(3) protocol on a path socket and on an abstract one: READY=1 once the
        client port serves, STOPPING=1 on SIGTERM, then exit 0."""
        path = os.path.join(tempfile.mkdtemp(prefix="slotd-notify-sock-"), "notify")
        self.addCleanup(shutil.rmtree, os.path.dirname(path), ignore_errors=True)
        abstract = "slotd-test-notify-%d" % os.getpid()
        for address, bind_to in ((path, path), ("@" + abstract, "\0" + abstract)):
            with self.subTest(address=address):
                (ready, serving), (stopping, _) = self.notify_run(address, bind_to)
                self.assertIn("READY=1", ready.split("\n"))
                self.assertTrue(serving, "READY=1 before the client port served")
                self.assertIn("STOPPING=1", stopping.split("\n"))

    def test_environment_file(self):
        self.assertEqual(self.one("EnvironmentFile"), "/etc/default/slotd")

    def test_stop_and_restart(self):
        self.assertEqual(self.one("KillSignal"), "SIGTERM")
        # Room for the leadership hand-off SIGTERM starts, and the shutdown after it.
        self.assertGreaterEqual(seconds(self.one("TimeoutStopSec")), 5 * shutdown_transfer_s())
        self.assertEqual(self.one("Restart"), "on-failure")
        self.assertIn("2", self.one("RestartPreventExitStatus").split())

    def test_hardening(self):
        self.assertEqual(self.one("User"), "slotd")
        want = {"ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
                "NoNewPrivileges": "yes", "PrivateDevices": "yes"}
        for k, v in want.items():
            self.assertEqual(self.one(k), v, k)
        self.assertEqual(set(self.one("RestrictAddressFamilies").split()),
                         {"AF_INET", "AF_INET6", "AF_UNIX"})
        self.assertIn("@system-service", self.one("SystemCallFilter").split())
        self.assertEqual(self.one("CapabilityBoundingSet"), "")

    def test_limit_nofile_above_max_connections(self):
        limit = int(self.one("LimitNOFILE"))
        self.assertGreater(limit, 4 * int(slotd_default("--max-connections")))


class EnvFileTest(unittest.TestCase):
    def lines(self):
        with open(ENV_FILE) as f:
            return f.read().splitlines()

    def test_first_line_says_what_it_is(self):
        self.assertRegex(self.lines()[0], r"^# slotd\.default - ")

    def test_every_name_is_a_slotd_option(self):
        _, env = slotd_options()
        self.assertIn("SLOTD_PEER_LISTEN", env)  # the parser found the table
        names = []
        for line in self.lines():
            # Active lines and commented-out examples alike.
            m = re.match(r"^#?\s*(SLOTD_[A-Z0-9_]+)=", line)
            if m:
                names.append(m.group(1))
        self.assertGreater(len(names), 10)
        self.assertEqual([n for n in names if n not in env], [])
        self.assertNotIn("SLOTD_NOT_AN_OPTION", env)

    def test_lines_are_comments_or_assignments(self):
        active = {}
        for line in self.lines():
            if not line.strip() or line.startswith("#"):
                continue
            m = re.match(r"^(SLOTD_[A-Z0-9_]+)=(\S*)$", line)
            self.assertIsNotNone(m, "not NAME=value: %r" % line)
            self.assertNotIn(m.group(1), active, "set twice")
            active[m.group(1)] = m.group(2)
        # The unit passes --data-dir, which would override this.
        self.assertNotIn("SLOTD_DATA_DIR", active)
        self.assertEqual(port_of(active["SLOTD_LISTEN"]), 7700)
        self.assertEqual(port_of(active["SLOTD_PEER_LISTEN"]), 7701)
        self.assertEqual(port_of(active["SLOTD_METRICS_LISTEN"]), 9700)

    def test_slotd_accepts_the_active_lines(self):
        # slotd reads the file's variables: an unknown SLOTD_* name is logged ("is no option"),
        # a bad number exits 2. --echo-only serves no data, so nothing is written; the flags move
        # its ports off the file's.
        slotd_options()  # skips when slotd is not built
        environ = {k: v for k, v in os.environ.items() if not k.startswith("SLOTD_")}
        for line in self.lines():
            if re.match(r"^SLOTD_[A-Z0-9_]+=", line):
                k, v = line.split("=", 1)
                environ[k] = v
        p = subprocess.Popen([slotd_bin(), "--echo-only", "1", "--listen", "127.0.0.1:0",
                              "--peer-listen", "127.0.0.1:0", "--metrics-listen", ""],
                             env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        out = []
        try:
            for line in p.stdout:
                out.append(line)
                if 'msg="echo only"' in line:
                    break
            p.send_signal(signal.SIGTERM)
            rest, _ = p.communicate(timeout=20)
            out.append(rest)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        text = "".join(out)
        self.assertEqual(p.returncode, 0, text)
        self.assertIn('msg="echo only"', text)
        self.assertNotIn("no option", text)
        self.assertNotIn("level=error", text)


class ComposeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(COMPOSE) as f:
            cls.text = f.read()
        cls.doc = yaml.safe_load(cls.text)
        cls.services = cls.doc["services"]
        ep = entrypoint_flags()
        cls.client_port = port_of(ep["--listen"])
        cls.peer_port = port_of(ep["--peer-listen"])
        cls.data_dir = ep["--data-dir"]

    def flags(self, svc):
        cmd = self.services[svc]["command"]
        self.assertIsInstance(cmd, list, svc)
        return flags_of(cmd)

    def published(self, svc):
        """{container port: (host ip, host port)} of a service's ports."""
        out = {}
        for p in self.services[svc]["ports"]:
            parts = str(p).split(":")
            self.assertEqual(len(parts), 3, "publish as HOST_IP:HOST_PORT:PORT: %r" % p)
            out[int(parts[2])] = (parts[0], int(parts[1]))
        return out

    def test_first_line_says_what_it_is(self):
        self.assertRegex(self.text.splitlines()[0], r"^# compose\.yaml - ")

    def test_three_nodes_from_the_image(self):
        self.assertEqual(len(self.services), 3)
        with open(DOCKER_MD) as f:
            tag = re.search(r"docker build -t (\S+) \.", f.read()).group(1)
        for name, s in self.services.items():
            self.assertEqual(s["image"], tag, name)
            self.assertEqual(s.get("pull_policy"), "never", name)
            self.assertNotIn("entrypoint", s, name)
            # With SLOTD_CLUSTER_SIZE the entrypoint would compute a StatefulSet's peers.
            self.assertNotIn("SLOTD_CLUSTER_SIZE", json.dumps(s.get("environment", {})), name)

    def test_every_flag_is_a_slotd_option(self):
        known, _ = slotd_options()
        for name in self.services:
            unknown = set(self.flags(name)) - known
            self.assertEqual(unknown, set(), name)
        self.assertNotIn("--peer", known)  # a prefix is not an option

    def test_node_ids_unique(self):
        ids = [int(self.flags(n)["--node-id"]) for n in self.services]
        self.assertEqual(sorted(ids), list(range(1, len(ids) + 1)))

    def test_peers_name_every_node(self):
        want = {}
        for name in self.services:
            want[int(self.flags(name)["--node-id"])] = "%s:%d" % (name, self.peer_port)
        for name in self.services:
            peers = dict(p.split("=", 1) for p in self.flags(name)["--peers"].split(","))
            self.assertEqual({int(k): v for k, v in peers.items()}, want, name)

    def test_advertised_addresses(self):
        for name, s in self.services.items():
            f = self.flags(name)
            self.assertEqual(s.get("hostname", name), name)
            # The other nodes dial the peer port by service name on the compose network.
            self.assertEqual(f["--peer-advertise"], "%s:%d" % (name, self.peer_port), name)
            # Clients on the Docker host dial the published client port.
            ip, port = self.published(name)[self.client_port]
            self.assertEqual(f["--advertise"], "%s:%d" % (ip, port), name)

    def test_metrics_listen_inside(self):
        for name in self.services:
            ml = self.flags(name)["--metrics-listen"]
            self.assertEqual(ml, "0.0.0.0:9700", name)
            self.assertIn(port_of(ml), self.published(name), name)

    def test_host_ports_unique_and_peer_port_private(self):
        seen = []
        for name in self.services:
            pub = self.published(name)
            self.assertNotIn(self.peer_port, pub, "%s publishes the peer port" % name)
            self.assertIn(self.client_port, pub, name)
            seen += [hp for _, hp in pub.values()]
        self.assertEqual(len(seen), len(set(seen)), seen)

    def test_own_volume_each(self):
        vols = []
        for name, s in self.services.items():
            mounts = [v for v in s["volumes"] if v.split(":")[1] == self.data_dir]
            self.assertEqual(len(mounts), 1, name)
            vols.append(mounts[0].split(":")[0])
        self.assertEqual(len(set(vols)), len(vols))
        self.assertEqual(set(vols), set(self.doc["volumes"]))

    def test_cluster_secret(self):
        for name, s in self.services.items():
            path = self.flags(name)["--cluster-secret-file"]
            secret = os.path.basename(path)
            self.assertEqual(path, "/run/secrets/" + secret, name)
            self.assertIn(secret, s["secrets"], name)
            self.assertIn(secret, self.doc["secrets"])
        with open(os.path.join(os.path.dirname(COMPOSE), ".gitignore")) as f:
            ignored = f.read().split()
        self.assertIn(os.path.basename(self.doc["secrets"][secret]["file"]), ignored)

    def test_healthcheck_is_the_images_probe(self):
        probe = dockerfile_json("HEALTHCHECK")
        self.assertEqual(probe[0], "slotd-health")
        for name, s in self.services.items():
            self.assertEqual(s["healthcheck"]["test"], ["CMD"] + probe, name)

    def test_stop_grace_covers_the_hand_off(self):
        for name, s in self.services.items():
            self.assertEqual(s.get("stop_signal", "SIGTERM"), "SIGTERM", name)
            self.assertGreaterEqual(seconds(s["stop_grace_period"]), 5 * shutdown_transfer_s())


class DocsTest(unittest.TestCase):
    def test_first_lines_say_what_they_are(self):
        for path in DOCS:
            with open(path) as f:
                self.assertRegex(f.readline(), r"^<!-- docs/%s - " % os.path.basename(path))

    def test_slotd_flags_in_code_blocks_are_options(self):
        known, _ = slotd_options()
        n = 0
        for path in DOCS:
            for prog, flag, cmd in doc_flag_uses(path):
                if prog == "slotd":
                    n += 1
                    self.assertIn(flag, known, "%s: %s" % (os.path.basename(path), cmd))
        self.assertGreater(n, 3)

    def test_slotctl_flags_in_code_blocks_exist(self):
        known = slotctl_flags()
        n = 0
        for path in DOCS:
            for prog, flag, cmd in doc_flag_uses(path):
                if prog == "slotctl":
                    n += 1
                    self.assertIn(flag, known, "%s: %s" % (os.path.basename(path), cmd))
        self.assertGreater(n, 0)

    def test_flag_extraction(self):
        # The extraction sees flags after slotd, after the image of docker run, across a
        # continuation, and not those of other programs.
        with tempfile.NamedTemporaryFile("w", suffix=".md") as f:
            f.write("```sh\nFOO=1 build/bin/slotd --listen 0.0.0.0:1 \\\n  --nope=2  # --c\n"
                    "docker run -p 1:1 -v a:/b slotd:latest --metrics-listen x | slotctl"
                    " --json get k\ncurl --silent x\nsudo useradd --home-dir /var/lib/slotd"
                    " --system slotd\nfor i in 1; do sudo slotd --peers p; done\n```\n")
            f.flush()
            got = [(p, fl) for p, fl, _ in doc_flag_uses(f.name)]
        self.assertEqual(got, [("slotd", "--listen"), ("slotd", "--nope"),
                               ("slotd", "--metrics-listen"), ("slotctl", "--json"),
                               ("slotd", "--peers")])

    def test_slotd_env_names_are_options(self):
        _, env = slotd_options()
        for path in DOCS:
            bad = {n for n in doc_env_names(path) if n not in env | CLIENT_ENV}
            self.assertEqual(bad, set(), os.path.basename(path))

    def test_install_cluster_env_block(self):
        blocks = [b for _, b in code_blocks(INSTALL_MD) if b.startswith("SLOTD_NODE_ID=")]
        self.assertEqual(len(blocks), 1)
        env = dict(l.split("=", 1) for l in blocks[0].splitlines())
        peers = dict(p.split("=", 1) for p in env["SLOTD_PEERS"].split(","))
        self.assertEqual(len(peers), 3)
        self.assertEqual(peers[env["SLOTD_NODE_ID"]], env["SLOTD_PEER_ADVERTISE"])
        self.assertEqual({port_of(a) for a in peers.values()}, {port_of(env["SLOTD_PEER_LISTEN"])})
        self.assertEqual(port_of(env["SLOTD_LISTEN"]), 7700)
        self.assertEqual(port_of(env["SLOTD_ADVERTISE"]), 7700)
        self.assertEqual(port_of(env["SLOTD_METRICS_LISTEN"]), 9700)

    def test_docker_md_includes_compose_yaml(self):
        with open(COMPOSE) as f:
            compose = f.read()
        yamls = [b for lang, b in code_blocks(DOCKER_MD) if lang == "yaml"]
        self.assertEqual(yamls, [compose], "docs/docker.md's yaml block is not compose.yaml")

    def test_docs_readme_lists_them(self):
        with open(os.path.join(REPO, "docs", "README.md")) as f:
            readme = f.read()
        for path in DOCS:
            self.assertIn("`%s`" % os.path.basename(path), readme)


if __name__ == "__main__":
    unittest.main()
