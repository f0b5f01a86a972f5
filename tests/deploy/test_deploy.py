# test_deploy.py - checks the Dockerfile, slotd-health and deploy/prometheus, deploy/grafana without Docker
# or a cluster; test_kubernetes.py has the manifests and the entrypoint (run: /usr/bin/python3 -m unittest discover -s tests/deploy).
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA_DIR = "/var/lib/slotd"
PORT = 7700
PEER_PORT = 7701
HEALTH_POLL_S = 20.0  # bound on waiting for a fresh slotd to report SERVING
METRICS_POLL_S = 15.0  # bound on waiting for a fresh slotd's per-group series
PROM_DIR = os.path.join(REPO, "deploy", "prometheus")
DASHBOARD = os.path.join(REPO, "deploy", "grafana", "slotd-dashboard.json")
# Series Prometheus makes itself for each scrape target; slotd does not export them.
PROMETHEUS_SERIES = {"up"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
                "and", "or", "unless", "inf", "nan"}


def slotd_bin():
    return os.environ.get("SLOTD_BIN", os.path.join(REPO, "build", "bin", "slotd"))


def health_bin():
    """slotd-health next to slotd unless SLOTD_HEALTH_BIN says otherwise."""
    default = os.path.join(os.path.dirname(slotd_bin()), "slotd-health")
    return os.environ.get("SLOTD_HEALTH_BIN", default)


# ---- Dockerfile parsing: instructions with continuations joined, split into stages. ----

def dockerfile_instructions(path):
    out, cur = [], ""
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not cur and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.lstrip().startswith("#"):  # comment inside a continuation
                continue
            if line.endswith("\\"):
                cur += line[:-1] + " "
                continue
            cur += line
            word, _, rest = cur.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
            cur = ""
    return out


def dockerfile_stages(path):
    """[(from_line, [(instruction, args), ...]), ...] in file order."""
    stages = []
    for word, rest in dockerfile_instructions(path):
        if word == "FROM":
            stages.append((rest, []))
        else:
            stages[-1][1].append((word, rest))
    return stages


def makefile_recipe(target):
    """The recipe lines of a Makefile rule whose target starts with target."""
    lines, inside = [], False
    with open(os.path.join(REPO, "Makefile")) as f:
        for raw in f:
            if raw.startswith("\t") and inside:
                lines.append(raw.strip().lstrip("@"))
            else:
                inside = raw.startswith(target + ":")
    return lines


def make_to_shell(cmd):
    """A Makefile recipe as Docker would run it: variables bound the way `make build` binds them
    (BUILD=build, no CMAKE_FLAGS), output redirection and make's own flags dropped, and the -j
    count left as whatever follows -j."""
    cmd = cmd.replace("$(BUILD)", "build").replace("$(CMAKE_FLAGS)", "")
    toks = [t for t in shlex.split(cmd) if not t.startswith(">")]
    if "--" in toks:
        toks = toks[: toks.index("--")]
    return toks


def strip_jobs(toks):
    if "-j" in toks:
        i = toks.index("-j")
        return toks[:i] + toks[i + 2:]
    return toks


class DockerfileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stages = dockerfile_stages(os.path.join(REPO, "Dockerfile"))

    def test_two_stages_debian_12(self):
        self.assertEqual(len(self.stages), 2)
        self.assertEqual(self.stages[0][0].split()[0], "debian:bookworm")
        self.assertIn("AS build", self.stages[0][0])
        self.assertEqual(self.stages[1][0].split()[0], "debian:bookworm-slim")

    def test_build_stage_runs_make_build_commands(self):
        runs = [a for w, a in self.stages[0][1] if w == "RUN"]
        # make build = deps (scripts/deps.sh) + configure (cmake -S) + build (cmake --build).
        deps = makefile_recipe("deps")
        self.assertEqual(deps, ["scripts/deps.sh"])
        self.assertTrue(any(shlex.split(r)[0] == "scripts/deps.sh" for r in runs), runs)
        configure = [make_to_shell(c) for c in makefile_recipe("$(BUILD)/CMakeCache.txt")]
        build = [make_to_shell(c) for c in makefile_recipe("build")]
        self.assertEqual(len(configure), 1)
        self.assertEqual(len(build), 1)
        run_toks = [shlex.split(r) for r in runs]
        self.assertIn(configure[0], run_toks)
        self.assertIn(strip_jobs(build[0]), [strip_jobs(t) for t in run_toks])
        # Order: deps, then configure, then build.
        order = [runs.index(r) for r in runs
                 if shlex.split(r)[0] == "scripts/deps.sh"
                 or shlex.split(r) == configure[0]
                 or strip_jobs(shlex.split(r)) == strip_jobs(build[0])]
        self.assertEqual(order, sorted(order))
        self.assertEqual(len(order), 3)

    def test_runtime_stage(self):
        ins = self.stages[1][1]
        users = [a for w, a in ins if w == "USER"]
        self.assertEqual(len(users), 1)
        user = users[0].split(":")[0]
        self.assertNotIn(user, ("root", "0"))
        health = [a for w, a in ins if w == "HEALTHCHECK"]
        self.assertEqual(len(health), 1)
        self.assertIn('CMD ["slotd-health", "127.0.0.1:7700"]', health[0])
        self.assertIn(("EXPOSE", "%d %d" % (PORT, PEER_PORT)), ins)
        self.assertIn(("VOLUME", json.dumps([DATA_DIR])), ins)
        entry = [json.loads(a) for w, a in ins if w == "ENTRYPOINT"]
        self.assertEqual(len(entry), 1)
        self.assertEqual(entry[0], ["/usr/local/bin/slotd-entrypoint", "slotd", "--listen",
                                    "0.0.0.0:%d" % PORT, "--peer-listen", "0.0.0.0:%d" % PEER_PORT,
                                    "--data-dir", DATA_DIR])
        copies = [a for w, a in ins if w == "COPY"]
        self.assertIn("deploy/entrypoint.sh /usr/local/bin/slotd-entrypoint", copies)
        self.assertIn("--from=build /src/build/bin/slotd /usr/local/bin/slotd", copies)
        self.assertIn("--from=build /src/build/bin/slotd-health /usr/local/bin/slotd-health",
                      copies)
        self.assertIn("--from=build /src/build/bin/slotctl /usr/local/bin/slotctl", copies)

    def runtime_packages(self):
        pkgs = set()
        for w, a in self.stages[1][1]:
            if w == "RUN" and "apt-get install" in a:
                seg = a.split("apt-get install", 1)[1].split("&&")[0]
                pkgs |= {t for t in seg.split() if not t.startswith("-")}
        return pkgs

    def test_runtime_packages_cover_ldd(self):
        """Every Debian package owning a library slotd, slotd-health or slotctl links is installed
        in the runtime stage (libc6 comes with the base image), and nothing else is."""
        needed = set()
        slotctl = os.path.join(os.path.dirname(slotd_bin()), "slotctl")
        for binary in (slotd_bin(), health_bin(), slotctl):
            self.assertTrue(os.access(binary, os.X_OK), "build it first: %s" % binary)
            out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True)
            if "libasan.so" in out.stdout:
                # The image is built without sanitizers; a sanitizer build links more runtimes.
                self.skipTest("%s is a sanitizer build" % binary)
            for line in out.stdout.splitlines():
                if "=>" not in line or "not found" in line:
                    self.assertNotIn("not found", line)
                    continue
                lib = line.split("=>")[1].split()[0]
                owner = subprocess.run(["dpkg", "-S", os.path.realpath(lib)],
                                       capture_output=True, text=True)
                if owner.returncode != 0:
                    owner = subprocess.run(["dpkg", "-S", lib], capture_output=True, text=True)
                self.assertEqual(owner.returncode, 0, "no package owns %s" % lib)
                needed.add(owner.stdout.split(":")[0])
        needed.discard("libc6")
        self.assertEqual(self.runtime_packages(), needed)

    def test_dockerignore_keeps_sources(self):
        with open(os.path.join(REPO, ".dockerignore")) as f:
            pats = {l.strip() for l in f if l.strip() and not l.startswith("#")}
        for p in (".git", "build", "build-*", "slotd-data"):
            self.assertIn(p, pats)
        for needed in ("gen", "scripts", "deploy", "api", "service", "clients", "tests"):
            self.assertNotIn(needed, pats)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HealthProbeTest(unittest.TestCase):
    """slotd-health against a real slotd on 127.0.0.1."""

    def setUp(self):
        for b in (slotd_bin(), health_bin()):
            self.assertTrue(os.access(b, os.X_OK), "build it first: %s" % b)
        self.tmp = tempfile.mkdtemp(prefix="slotd-health-")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
            p.stdout.close()
        shutil.rmtree(self.tmp)

    def start_slotd(self, *extra):
        port = free_port()
        data = os.path.join(self.tmp, "data-%d" % port)
        p = subprocess.Popen([slotd_bin(), "--listen", "127.0.0.1:%d" % port, "--peer-listen",
                              "127.0.0.1:%d" % free_port(), "--data-dir", data, *extra],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p, port

    def probe(self, *args):
        t0 = time.monotonic()
        r = subprocess.run([health_bin(), *args], capture_output=True, text=True, timeout=10)
        return r, time.monotonic() - t0

    def poll_until(self, want_stdout, *args):
        deadline = time.monotonic() + HEALTH_POLL_S
        while True:
            r, _ = self.probe(*args)
            if r.stdout.strip() == want_stdout or time.monotonic() > deadline:
                return r
            time.sleep(0.1)

    def stop(self, p):
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(timeout=20), 0)

    def test_serving_single_node(self):
        p, port = self.start_slotd()
        addr = "127.0.0.1:%d" % port
        r = self.poll_until("SERVING", addr)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "SERVING"), r.stderr)
        r, _ = self.probe(addr, "slotd.v1.Metadata")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "SERVING"), r.stderr)
        r, _ = self.probe(addr, "no.such.Service")
        self.assertEqual(r.returncode, 1)
        self.assertIn("NOT_FOUND", r.stderr)
        self.stop(p)
        # Nothing listens there any more.
        r, took = self.probe(addr)
        self.assertEqual(r.returncode, 1)
        self.assertIn("UNAVAILABLE", r.stderr)
        self.assertLess(took, 3.0)

    def test_not_serving_without_quorum(self):
        # Node 1 of 2 alone: its slot groups (2 voters each) cannot elect a leader.
        absent = free_port()
        port = free_port()
        peer = free_port()
        data = os.path.join(self.tmp, "data-q")
        p = subprocess.Popen([slotd_bin(), "--listen", "127.0.0.1:%d" % port, "--peer-listen",
                              "127.0.0.1:%d" % peer, "--data-dir", data, "--node-id", "1",
                              "--peers", "1=127.0.0.1:%d,2=127.0.0.1:%d" % (peer, absent)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.procs.append(p)
        r = self.poll_until("NOT_SERVING", "127.0.0.1:%d" % port)
        self.assertEqual((r.returncode, r.stdout.strip()), (1, "NOT_SERVING"), r.stderr)
        self.stop(p)

    def test_closed_port(self):
        r, took = self.probe("127.0.0.1:%d" % free_port())
        self.assertEqual(r.returncode, 1)
        self.assertIn("UNAVAILABLE", r.stderr)
        self.assertLess(took, 3.0)

    def test_deadline_on_silent_peer(self):
        # A listener that accepts and never speaks HTTP/2: the 2 s deadline ends the probe.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(4)
            r, took = self.probe("127.0.0.1:%d" % s.getsockname()[1])
        self.assertEqual(r.returncode, 1)
        self.assertGreaterEqual(took, 1.5)
        self.assertLess(took, 5.0)

    def test_usage(self):
        for args in ((), ("a", "b", "c"), ("--bogus",), ("",)):
            r, _ = self.probe(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn("usage: slotd-health ADDR [SERVICE]", r.stderr)
        r, _ = self.probe("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("usage: slotd-health", r.stdout)


def promtool():
    """The promtool path. Missing: a failure under CI=true (make test must check the files), a
    skip elsewhere."""
    path = shutil.which("promtool")
    if path is None:
        msg = "promtool not found: install Debian's prometheus package (scripts/deps.sh)"
        if os.environ.get("CI") == "true":
            raise AssertionError(msg)
        raise unittest.SkipTest(msg)
    return path


def scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        return r.read().decode()


def exported_names(text):
    """Metric family names in an exposition: the names of its # TYPE lines."""
    return {l.split()[2] for l in text.splitlines() if l.startswith("# TYPE ")}


def sample(text, name):
    """The value of the first sample line of name (with or without labels), or None."""
    for l in text.splitlines():
        if l.startswith(name + " ") or l.startswith(name + "{"):
            return float(l.rsplit(" ", 1)[1])
    return None


def promql_metric_names(expr):
    """The metric names a PromQL expression selects: identifiers left once strings, label
    matchers, range selectors, by/without clauses, function names, keywords and template
    variables are taken out."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\$\w+", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(\s*\()?", e):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in PROMQL_WORDS:
            continue
        names.add(word)
    return names


def exported_series_names(text):
    """Every sample name an exposition may hold: each family's name, and for histograms its
    _bucket, _sum and _count."""
    out = set()
    for l in text.splitlines():
        if l.startswith("# TYPE "):
            _, _, name, kind = l.split()
            out.add(name)
            if kind == "histogram":
                out |= {name + "_bucket", name + "_sum", name + "_count"}
    return out


def dashboard_exprs(dash):
    exprs = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            exprs.append(("panel %r" % p["title"], t["expr"]))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"]
            inner = re.match(r"label_values\((.*),\s*\w+\)$", q)
            exprs.append(("variable %r" % v["name"], inner.group(1) if inner else q))
    return exprs


def rule_exprs():
    with open(os.path.join(PROM_DIR, "alerts.yml")) as f:
        doc = yaml.safe_load(f)
    return [(r["alert"], r["expr"]) for g in doc["groups"] for r in g["rules"]], doc


CLUSTER_SECRET = b"slotd deploy-test cluster secret, not for production"
METRICS_NODES = 3


class LiveMetricsTest(unittest.TestCase):
    """A real 3-node slotd cluster (one --peers, a cluster secret, --metrics-listen on a free port
    each) for the whole class; cls.text is node 1's exposition, cls.texts every node's."""

    @classmethod
    def setUpClass(cls):
        if not os.access(slotd_bin(), os.X_OK):
            raise AssertionError("build it first: %s" % slotd_bin())
        cls.tmp = tempfile.mkdtemp(prefix="slotd-metrics-")
        secret = os.path.join(cls.tmp, "cluster.secret")
        with open(secret, "wb") as f:
            f.write(CLUSTER_SECRET + b"\n")
        n = METRICS_NODES
        client, peer, metrics = ([free_port() for _ in range(n)] for _ in range(3))
        peers = ",".join("%d=127.0.0.1:%d" % (i + 1, peer[i]) for i in range(n))
        cls.metrics_ports = metrics
        cls.metrics_port = metrics[0]
        cls.procs = []
        for i in range(n):
            cls.procs.append(subprocess.Popen(
                [slotd_bin(), "--node-id", str(i + 1), "--peers", peers,
                 "--cluster-secret-file", secret,
                 "--listen", "127.0.0.1:%d" % client[i], "--peer-listen", "127.0.0.1:%d" % peer[i],
                 "--data-dir", os.path.join(cls.tmp, "data-%d" % (i + 1)),
                 "--metrics-listen", "127.0.0.1:%d" % metrics[i]],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        cls.proc = cls.procs[0]
        # Per-group series appear once the groups are open; wait until the controller group
        # (group 0) has a leader among the three and every node knows it.
        deadline = time.monotonic() + METRICS_POLL_S
        cls.texts = [""] * n
        while time.monotonic() < deadline:
            for i in range(n):
                try:
                    cls.texts[i] = scrape(metrics[i])
                except OSError:
                    cls.texts[i] = ""
            if cls.controller_led() and all('slotd_group_has_leader{group="0"} 1' in t
                                            for t in cls.texts):
                break
            time.sleep(0.1)
        cls.text = cls.texts[0]

    @classmethod
    def controller_led(cls):
        return any('slotd_raft_is_leader{group="0"} 1' in t for t in cls.texts)

    @classmethod
    def tearDownClass(cls):
        for proc in cls.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in cls.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        shutil.rmtree(cls.tmp)

    def test_promtool_check_metrics(self):
        self.assertTrue(self.controller_led(),
                        "no leader of group 0 within %.0f s" % METRICS_POLL_S)
        for i, text in enumerate(self.texts):
            r = subprocess.run([promtool(), "check", "metrics"], input=text,
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, "node %d: %s" % (i + 1, r.stdout + r.stderr))
            # promtool reports lint problems on stdout/stderr even when they are only warnings.
            self.assertEqual((r.stdout + r.stderr).strip(), "", "node %d" % (i + 1))

    def test_docs_metric_tables_match_exports(self):
        """service/metrics/README.md's metric table names exactly the families the cluster's
        nodes export; README.md's names only exported ones (it may leave some to the other)."""
        exported = set()
        for text in self.texts:
            exported |= {l.split()[2] for l in text.splitlines() if l.startswith("# TYPE ")}
        tables = {}
        for doc in ("service/metrics/README.md", "README.md"):
            with open(os.path.join(REPO, doc)) as f:
                tables[doc] = set(re.findall(r"^\| `((?:slotd|process)_[a-z_]+)` \|", f.read(),
                                             re.M))
            self.assertTrue(tables[doc], doc)
            self.assertEqual(tables[doc] - exported, set(), "%s names unexported metrics" % doc)
        self.assertEqual(exported - tables["service/metrics/README.md"], set(),
                         "exported, not in service/metrics/README.md's table")

    def test_build_and_process_metrics(self):
        r = subprocess.run([slotd_bin(), "--version"], capture_output=True, text=True, timeout=10)
        version = r.stdout.split()[1]
        line = [l for l in self.text.splitlines() if l.startswith("slotd_build_info{")]
        self.assertEqual(len(line), 1, line)
        self.assertTrue(line[0].startswith('slotd_build_info{version="%s",commit="' % version),
                        line)
        self.assertTrue(line[0].endswith("} 1"), line)
        commit = line[0].split('commit="')[1].split('"')[0]
        self.assertRegex(commit, r"^([0-9a-f]{40}|unknown)$")
        now = time.time()
        start = sample(self.text, "process_start_time_seconds")
        self.assertGreater(start, now - 120)
        self.assertLessEqual(start, now + 1)
        self.assertGreater(sample(self.text, "process_resident_memory_bytes"), 1 << 20)
        # slotd holds at least: stdio, the store's files, the gRPC and metrics sockets.
        fds = sample(self.text, "process_open_fds")
        self.assertGreater(fds, 5)
        # Connections come and go between the scrape and this listing: near, not equal.
        self.assertLess(abs(fds - len(os.listdir("/proc/%d/fd" % self.proc.pid))), 32)
        self.assertGreaterEqual(sample(self.text, "process_cpu_seconds_total"), 0)
        self.assertGreater(sample(self.text, "slotd_data_dir_size_bytes"), 0)
        st = os.statvfs(self.tmp)
        self.assertAlmostEqual(sample(self.text, "slotd_data_dir_available_bytes"),
                               st.f_bavail * st.f_frsize, delta=512 << 20)

    def test_promtool_rules_and_config(self):
        tool = promtool()
        for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts_test.yml"],
                     ["check", "config", "prometheus.yml"]):
            r = subprocess.run([tool, *args], cwd=PROM_DIR, capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, 0, "promtool %s:\n%s%s" % (" ".join(args), r.stdout,
                                                                      r.stderr))

    def test_rules_and_dashboard_use_exported_metrics(self):
        self.assertTrue(self.controller_led())
        exported = set()
        for text in self.texts:  # what the 3-node cluster exports, any node
            exported |= exported_series_names(text)
        with open(DASHBOARD) as f:
            dash = json.load(f)
        rules, _ = rule_exprs()
        used = {}
        for where, expr in rules + dashboard_exprs(dash):
            names = promql_metric_names(expr)
            self.assertTrue(names, "%s: no metric in %r" % (where, expr))
            for n in names:
                used.setdefault(n, []).append(where)
        missing = {n: w for n, w in used.items()
                   if n not in exported and n not in PROMETHEUS_SERIES}
        self.assertEqual(missing, {}, "used but not exported by a running slotd")
        # The check sees through label matchers, ranges and clauses, and would catch a typo.
        self.assertEqual(promql_metric_names(
            'histogram_quantile(0.99, sum by (le) (rate(slotd_x_bucket{a="b{c}"}[5m]))) > 0.5 '
            'or on (instance) up{job="slotd"} - $foo'), {"slotd_x_bucket", "up"})
        self.assertNotIn("slotd_raft_is_leadr", exported)

    def test_rules_structure(self):
        rules, doc = rule_exprs()
        names = [a for a, _ in rules]
        for want in ("SlotdGroupNoLeader", "SlotdControllerNoQuorum", "SlotdNodeDown",
                     "SlotdQueueSaturated", "SlotdDiskNearlyFull", "SlotdBackupOverdue"):
            self.assertIn(want, names)
        self.assertEqual(len(names), len(set(names)))
        for g in doc["groups"]:
            for r in g["rules"]:
                self.assertIn(r["labels"]["severity"], ("critical", "warning"), r["alert"])
                self.assertTrue(r["annotations"]["summary"], r["alert"])
                self.assertIn("for", r, r["alert"])
        no_leader = [r for g in doc["groups"] for r in g["rules"]
                     if r["alert"] == "SlotdGroupNoLeader"][0]
        self.assertEqual(no_leader["for"], "30s")

    def test_dashboard_structure(self):
        with open(DASHBOARD) as f:
            dash = json.load(f)
        ids = [p["id"] for p in dash["panels"]]
        self.assertEqual(len(ids), len(set(ids)))
        rows = [p["title"] for p in dash["panels"] if p["type"] == "row"]
        self.assertEqual(rows, ["Cluster overview", "Node $instance", "Group $group"])
        variables = {v["name"] for v in dash["templating"]["list"]}
        self.assertEqual(variables, {"datasource", "instance", "group"})
        cells = set()
        for p in dash["panels"]:
            g = p["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, p["title"])
            for dx in range(g["w"]):
                for dy in range(g["h"]):
                    cell = (g["x"] + dx, g["y"] + dy)
                    self.assertNotIn(cell, cells, "panel %r overlaps another" % p["title"])
                    cells.add(cell)
            if p["type"] == "row":
                continue
            self.assertEqual(p["datasource"]["uid"], "${datasource}", p["title"])
            self.assertTrue(p["targets"], p["title"])
            for t in p["targets"]:
                for var in re.findall(r"\$(\w+)", t["expr"]):
                    self.assertIn(var, variables | {"__rate_interval"}, p["title"])


if __name__ == "__main__":
    unittest.main()
