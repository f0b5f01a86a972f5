# test_kubernetes.py - renders every deploy/kubernetes overlay with `kubectl kustomize` and checks ports, probes, flags, securityContext, scheduling, selectors and Secret mounts; runs deploy/entrypoint.sh (voters vs join mode) and checks docs/kubernetes.md against the manifests (run: /usr/bin/python3 -m unittest discover -s tests/deploy).
import os
import re
import shutil
import subprocess
import socket
import tempfile
import time
import unittest
import urllib.request

import yaml

import test_ops_files as ops

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KUBE_DIR = os.path.join(REPO, "deploy", "kubernetes")
OVERLAYS_DIR = os.path.join(KUBE_DIR, "overlays")
ENTRYPOINT = os.path.join(REPO, "deploy", "entrypoint.sh")
K8S_MD = os.path.join(REPO, "docs", "kubernetes.md")
CLIENT_PORT, PEER_PORT, METRICS_PORT = 7700, 7701, 9700
DATA_DIR = "/var/lib/slotd"
UID = 10001
# slotd flags naming a file the pod must have mounted.
FILE_FLAGS = ("--tls-cert", "--tls-key", "--tls-ca", "--cluster-secret-file",
              "--root-password-file")
# Flags the entrypoint adds in StatefulSet mode.
ENTRYPOINT_FLAGS = {"--node-id", "--peers", "--join", "--bootstrap-expect", "--advertise",
                    "--peer-advertise"}

_rendered = {}


def overlays():
    return sorted(d for d in os.listdir(OVERLAYS_DIR)
                  if os.path.isfile(os.path.join(OVERLAYS_DIR, d, "kustomization.yaml")))


def render(overlay):
    """The objects `kubectl kustomize deploy/kubernetes/overlays/<overlay>` prints."""
    if shutil.which("kubectl") is None:
        raise unittest.SkipTest("kubectl not installed (Debian kubernetes-client): overlays not "
                                "rendered")
    if overlay not in _rendered:
        r = subprocess.run(["kubectl", "kustomize", os.path.join(OVERLAYS_DIR, overlay)],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise AssertionError("kubectl kustomize %s: %s" % (overlay, r.stderr))
        _rendered[overlay] = [d for d in yaml.safe_load_all(r.stdout) if d is not None]
    return _rendered[overlay]


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


class Rendered:
    """One overlay's objects, with the parts the checks look at."""

    def __init__(self, overlay):
        self.name = overlay
        self.docs = render(overlay)
        (self.sts,) = self.of_kind("StatefulSet")
        self.pod = self.sts["spec"]["template"]["spec"]
        self.pod_labels = self.sts["spec"]["template"]["metadata"]["labels"]
        (self.container,) = self.pod["containers"]
        self.flags = ops.flags_of(self.container["args"])
        self.env = {e["name"]: e for e in self.container.get("env", [])}
        self.ports = {p["name"]: p["containerPort"] for p in self.container["ports"]}
        self.mounts = {m["mountPath"]: m for m in self.container["volumeMounts"]}
        self.volumes = {v["name"]: v for v in self.pod.get("volumes", [])}

    def of_kind(self, kind):
        return [d for d in self.docs if d["kind"] == kind]

    def service(self, name):
        (s,) = [d for d in self.of_kind("Service") if d["metadata"]["name"] == name]
        return s

    def env_value(self, name):
        return self.env[name]["value"]


class OverlayTest(unittest.TestCase):
    """Each check runs on every overlay (a subTest each)."""

    @classmethod
    def setUpClass(cls):
        cls.all = [Rendered(o) for o in overlays()]

    def each(self):
        for r in self.all:
            with self.subTest(overlay=r.name):
                yield r

    def test_overlays_exist_and_flat_files_are_gone(self):
        self.assertEqual([r.name for r in self.all], ["dev", "prod"])
        self.assertEqual([f for f in os.listdir(KUBE_DIR) if f.endswith(".yaml")], [])

    def test_first_lines_say_what_they_are(self):
        for root, _, files in os.walk(KUBE_DIR):
            for f in files:
                if f.endswith(".yaml"):
                    with open(os.path.join(root, f)) as fh:
                        self.assertRegex(fh.readline(), r"^# %s - " % re.escape(f),
                                         os.path.join(root, f))

    def test_kinds(self):
        for r in self.each():
            kinds = sorted(d["kind"] for d in r.docs)
            expected = ["PodDisruptionBudget", "Service", "Service", "Service", "StatefulSet"]
            if r.name == "prod":
                expected.insert(4, "ServiceMonitor")
            self.assertEqual(kinds, expected)
            for d in r.docs:
                self.assertIn("apiVersion", d)
                self.assertIn("name", d["metadata"])
            # The entrypoint takes <set>-<ordinal> from the pod name.
            self.assertEqual(r.sts["metadata"]["name"], "slotd")
            self.assertEqual(r.sts["spec"]["podManagementPolicy"], "Parallel")

    def test_container_ports_and_listen_flags_agree(self):
        for r in self.each():
            self.assertEqual(r.ports, {"client": CLIENT_PORT, "peer": PEER_PORT,
                                       "metrics": METRICS_PORT})
            self.assertEqual(r.flags["--listen"], "0.0.0.0:%d" % CLIENT_PORT)
            self.assertEqual(r.flags["--peer-listen"], "0.0.0.0:%d" % PEER_PORT)
            # slotd's default 127.0.0.1:9700 could not be scraped from outside the pod.
            self.assertEqual(r.flags["--metrics-listen"], "0.0.0.0:%d" % METRICS_PORT)
            self.assertEqual(int(r.env_value("SLOTD_CLIENT_PORT")), CLIENT_PORT)
            self.assertEqual(int(r.env_value("SLOTD_PEER_PORT")), PEER_PORT)
            self.assertEqual(r.container["command"], ["/usr/local/bin/slotd-entrypoint", "slotd"])

    def test_services(self):
        for r in self.each():
            headless = r.service(r.sts["spec"]["serviceName"])
            self.assertEqual(headless["spec"]["clusterIP"], "None")
            self.assertIs(headless["spec"]["publishNotReadyAddresses"], True)
            self.assertEqual(r.env_value("SLOTD_HEADLESS_SERVICE"), headless["metadata"]["name"])
            client = r.service("slotd")
            self.assertEqual(client["spec"].get("type", "ClusterIP"), "ClusterIP")
            metrics = r.service("slotd-metrics")
            want = {"slotd-headless": {"client": CLIENT_PORT, "peer": PEER_PORT},
                    "slotd": {"client": CLIENT_PORT},
                    "slotd-metrics": {"metrics": METRICS_PORT}}
            for svc in (headless, client, metrics):
                name = svc["metadata"]["name"]
                self.assertTrue(matches(svc["spec"]["selector"], r.pod_labels), name)
                ports = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
                self.assertEqual(ports, want[name], name)
                for p in svc["spec"]["ports"]:
                    # targetPort by name, and that name is the container port with this number.
                    self.assertEqual(r.ports[p["targetPort"]], p["port"], name)
            self.assertEqual(len(r.of_kind("Service")), 3)

    def probes(self, r):
        return {k: r.container[k] for k in ("startupProbe", "readinessProbe", "livenessProbe")}

    def probe_target(self, r, kind, p):
        """(port, service) the probe calls grpc.health.v1.Health/Check with."""
        if "grpc" in p:
            self.assertNotIn("exec", p, kind)
            return p["grpc"]["port"], p["grpc"].get("service", "")
        cmd = p["exec"]["command"]
        self.assertEqual(cmd[0], "slotd-health", kind)
        flags, pos, i = {}, [], 1
        while i < len(cmd):  # every slotd-health option takes a value
            if cmd[i].startswith("--"):
                flags[cmd[i]] = cmd[i + 1]
                i += 2
            else:
                pos.append(cmd[i])
                i += 1
        self.assertEqual(len(pos), 2, "%s: slotd-health [flags] ADDR SERVICE: %r" % (kind, cmd))
        addr, service = pos
        self.assertEqual(addr.rsplit(":", 1)[0], "127.0.0.1", kind)
        for flag in ("--tls-ca", "--tls-cert", "--tls-key"):
            if flag in flags:
                self.assertIsNotNone(secret_file(r, flags[flag]), kind)
        if "--tls-cert" in r.flags:
            self.assertEqual(flags.get("--tls-ca"), r.flags["--tls-ca"], kind)
        # With --tls-client-auth 1 the probe would need a client certificate too.
        if r.flags.get("--tls-client-auth") == "1":
            self.assertIn("--tls-cert", flags, kind)
        self.assertGreater(p["timeoutSeconds"], 2, "%s: slotd-health waits up to 2 s" % kind)
        return port_of(addr), service

    def test_probes_call_the_health_service_on_the_client_port(self):
        for r in self.each():
            got = {k: self.probe_target(r, k, p) for k, p in self.probes(r).items()}
            self.assertEqual(got, {"startupProbe": (CLIENT_PORT, ""),
                                   "readinessProbe": (CLIENT_PORT, ""),
                                   "livenessProbe": (CLIENT_PORT, "liveness")})
            for k, p in self.probes(r).items():
                for other in ("httpGet", "tcpSocket"):
                    self.assertNotIn(other, p, k)
                # The kubelet's gRPC probes are plaintext: with TLS on they would never pass.
                if "--tls-cert" in r.flags:
                    self.assertNotIn("grpc", p, "%s: kubelet gRPC probes cannot speak TLS" % k)
            # Start-up gets longer than a restart of a whole cluster's pods takes.
            s = r.container["startupProbe"]
            self.assertGreaterEqual(s["periodSeconds"] * s["failureThreshold"], 300)

    def test_security_context(self):
        for r in self.each():
            pod = r.pod["securityContext"]
            self.assertIs(pod["runAsNonRoot"], True)
            self.assertEqual((pod["runAsUser"], pod["runAsGroup"], pod["fsGroup"]),
                             (UID, UID, UID))
            self.assertEqual(pod["seccompProfile"], {"type": "RuntimeDefault"})
            c = r.container["securityContext"]
            self.assertIs(c["runAsNonRoot"], True)
            self.assertEqual((c["runAsUser"], c["runAsGroup"]), (UID, UID))
            self.assertIs(c["readOnlyRootFilesystem"], True)
            self.assertIs(c["allowPrivilegeEscalation"], False)
            self.assertEqual(c["capabilities"], {"drop": ["ALL"]})
            self.assertEqual(c["seccompProfile"], {"type": "RuntimeDefault"})
            self.assertNotIn("privileged", c)

    def test_writable_paths_are_volumes(self):
        for r in self.each():
            (vct,) = r.sts["spec"]["volumeClaimTemplates"]
            self.assertEqual(vct["metadata"]["name"], "data")
            self.assertIn("ReadWriteOnce", vct["spec"]["accessModes"])
            self.assertIn("storage", vct["spec"]["resources"]["requests"])
            self.assertEqual(r.flags["--data-dir"], DATA_DIR)
            self.assertEqual(r.mounts[DATA_DIR]["name"], "data")
            self.assertNotIn("data", r.volumes)  # the pod's volumes must not shadow the claim
            self.assertIn("emptyDir", r.volumes[r.mounts["/tmp"]["name"]])
            for path, m in r.mounts.items():
                if path not in (DATA_DIR, "/tmp"):
                    self.assertIs(m.get("readOnly"), True, path)

    def test_resources(self):
        for r in self.each():
            res = r.container["resources"]
            for k in ("cpu", "memory"):
                self.assertIn(k, res["requests"])
                self.assertIn(k, res["limits"])
        dev, prod = self.all
        self.assertLess(quantity(dev.container["resources"]["limits"]["memory"]),
                        quantity(prod.container["resources"]["requests"]["memory"]))
        self.assertLess(quantity(dev.container["resources"]["requests"]["cpu"]),
                        quantity(prod.container["resources"]["requests"]["cpu"]))

    def test_replicas_and_scheduling(self):
        by = {r.name: r for r in self.all}
        for r in self.each():
            self.assertEqual(int(r.env_value("SLOTD_CLUSTER_SIZE")), r.sts["spec"]["replicas"])
            self.assertEqual(r.env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"],
                             "metadata.namespace")
        self.assertEqual(by["dev"].sts["spec"]["replicas"], 1)
        self.assertNotIn("requiredDuringSchedulingIgnoredDuringExecution",
                         by["dev"].pod.get("affinity", {}).get("podAntiAffinity", {}))
        prod = by["prod"]
        self.assertEqual(prod.sts["spec"]["replicas"], 3)
        anti = prod.pod["affinity"]["podAntiAffinity"]
        (req,) = anti["requiredDuringSchedulingIgnoredDuringExecution"]
        self.assertEqual(req["topologyKey"], "kubernetes.io/hostname")
        self.assertTrue(matches(req["labelSelector"]["matchLabels"], prod.pod_labels))
        self.assertNotIn("preferredDuringSchedulingIgnoredDuringExecution", anti)
        (spread,) = prod.pod["topologySpreadConstraints"]
        self.assertEqual(spread["topologyKey"], "topology.kubernetes.io/zone")
        self.assertEqual(spread["maxSkew"], 1)
        self.assertTrue(matches(spread["labelSelector"]["matchLabels"], prod.pod_labels))

    def test_selectors(self):
        for r in self.each():
            self.assertTrue(matches(r.sts["spec"]["selector"]["matchLabels"], r.pod_labels))
            (pdb,) = r.of_kind("PodDisruptionBudget")
            self.assertEqual(pdb["apiVersion"], "policy/v1")
            self.assertEqual(pdb["spec"]["maxUnavailable"], 1)
            self.assertNotIn("minAvailable", pdb["spec"])
            self.assertTrue(matches(pdb["spec"]["selector"]["matchLabels"], r.pod_labels))

    def test_servicemonitor_scrapes_the_metrics_port(self):
        for r in self.each():
            for sm in r.of_kind("ServiceMonitor"):
                self.assertEqual(sm["apiVersion"], "monitoring.coreos.com/v1")
                sel = sm["spec"]["selector"]["matchLabels"]
                chosen = [s for s in r.of_kind("Service") if matches(sel, s["metadata"]["labels"])]
                self.assertEqual([s["metadata"]["name"] for s in chosen], ["slotd-metrics"])
                names = {p["name"] for p in chosen[0]["spec"]["ports"]}
                (ep,) = sm["spec"]["endpoints"]
                self.assertIn(ep["port"], names)
                self.assertEqual(ep.get("path", "/metrics"), "/metrics")
                self.assertEqual(ep.get("scheme", "http"), "http")
        self.assertEqual(len([r for r in self.all if r.of_kind("ServiceMonitor")]), 1)

    def test_every_file_flag_is_a_mounted_secret(self):
        for r in self.each():
            for flag in FILE_FLAGS:
                if flag in r.flags:
                    self.assertIsNotNone(secret_file(r, r.flags[flag]), flag)
        (prod,) = [r for r in self.all if r.name == "prod"]
        used = {secret_file(prod, prod.flags[f]) for f in FILE_FLAGS}
        self.assertEqual(used, PROD_SECRETS)
        self.assertEqual(prod.flags["--auth"], "1")
        for r in self.each():
            for v in r.volumes.values():
                if "secret" in v:
                    self.assertEqual(v["secret"]["defaultMode"] & 0o007, 0, v["name"])

    def test_flags_are_slotd_options(self):
        known, _ = ops.slotd_options()
        for r in self.each():
            for tok in r.container["args"]:
                if tok.startswith("--"):
                    self.assertIn(ops.flag_name(tok), known, tok)
        self.assertLessEqual(ENTRYPOINT_FLAGS, known)


def secret_file(r, path):
    """(Secret name, key) of the Secret volume that puts file path in r's container, or None."""
    m = r.mounts.get(os.path.dirname(path))
    if m is None or "secret" not in r.volumes.get(m["name"], {}):
        return None
    if m.get("readOnly") is not True:
        return None
    secret = r.volumes[m["name"]]["secret"]
    name = os.path.basename(path)
    if "items" in secret:  # only the listed keys, at their paths
        keys = [i["key"] for i in secret["items"] if i["path"] == name]
        return (secret["secretName"], keys[0]) if keys else None
    return secret["secretName"], name  # every key is a file named after it


def quantity(q):
    units = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "m": 0.001}
    for u, f in units.items():
        if str(q).endswith(u):
            return float(str(q)[:-len(u)]) * f
    return float(q)


# The Secrets overlays/prod mounts: (name, key), each a file its flags name.
PROD_SECRETS = {("slotd-tls", "tls.crt"), ("slotd-tls", "tls.key"), ("slotd-tls", "ca.crt"),
                ("slotd-cluster", "cluster.secret"), ("slotd-root", "root.password")}


class EntrypointTest(unittest.TestCase):
    """deploy/entrypoint.sh under /bin/sh with a fake slotd that prints its arguments."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="slotd-entrypoint-")
        fake = os.path.join(self.tmp, "slotd")
        with open(fake, "w") as f:
            # Arguments on stdout, one a line; the SLOTD_* variables slotd would see on stderr.
            f.write('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n'
                    'env | grep "^SLOTD_" | sort >&2 || true\n')
        os.chmod(fake, 0o755)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_entry(self, env_extra, args=("slotd", "--listen", "0.0.0.0:7700", "--data-dir",
                                         DATA_DIR)):
        env = {"PATH": self.tmp + ":/usr/bin:/bin"}
        env.update(env_extra)
        return subprocess.run(["/bin/sh", ENTRYPOINT, *args], env=env, capture_output=True,
                              text=True, timeout=10)

    def flags(self, env):
        r = self.run_entry(env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "", "entrypoint variables left in slotd's environment")
        out = r.stdout.splitlines()
        self.assertEqual(out[-4:], ["--listen", "0.0.0.0:7700", "--data-dir", DATA_DIR])
        return out[:-4]

    @staticmethod
    def name(k, ns="ns"):
        return "slotd-%d.slotd-headless.%s.svc.cluster.local" % (k, ns)

    def test_ordinal_0_is_an_initial_voter(self):
        env = {"HOSTNAME": "slotd-0", "SLOTD_CLUSTER_SIZE": "3", "POD_NAMESPACE": "ns"}
        peers = ",".join("%d=%s:7701" % (k + 1, self.name(k)) for k in range(3))
        self.assertEqual(self.flags(env),
                         ["--node-id", "1", "--peers", peers, "--bootstrap-expect", "3",
                          "--advertise", self.name(0) + ":7700",
                          "--peer-advertise", self.name(0) + ":7701"])

    def test_ordinal_4_joins_through_slotd_0(self):
        for size in ("3", "5"):  # beyond SLOTD_CLUSTER_SIZE (kubectl scale) or within it
            env = {"HOSTNAME": "slotd-4", "SLOTD_CLUSTER_SIZE": size, "POD_NAMESPACE": "ns"}
            out = self.flags(env)
            self.assertEqual(out, ["--node-id", "5", "--join", self.name(0) + ":7701",
                                   "--advertise", self.name(4) + ":7700",
                                   "--peer-advertise", self.name(4) + ":7701"], size)
            self.assertNotIn("--peers", out)

    def test_bootstrap_size_5_keeps_3_voters(self):
        env = {"HOSTNAME": "slotd-2", "SLOTD_CLUSTER_SIZE": "5", "POD_NAMESPACE": "prod",
               "SLOTD_CLUSTER_DOMAIN": "k8s.example", "SLOTD_PEER_PORT": "7801",
               "SLOTD_CLIENT_PORT": "7800", "SLOTD_HEADLESS_SERVICE": "h"}
        out = dict(zip(self.flags(env)[::2], self.flags(env)[1::2]))
        self.assertEqual(out["--peers"].split(","),
                         ["%d=slotd-%d.h.prod.svc.k8s.example:7801" % (k + 1, k) for k in range(3)])
        self.assertEqual(out["--bootstrap-expect"], "5")
        self.assertEqual(out["--advertise"], "slotd-2.h.prod.svc.k8s.example:7800")
        env["HOSTNAME"] = "slotd-3"
        out = dict(zip(self.flags(env)[::2], self.flags(env)[1::2]))
        self.assertEqual(out["--join"], "slotd-0.h.prod.svc.k8s.example:7801")

    def test_initial_voters_clamped_to_cluster_size(self):
        env = {"HOSTNAME": "slotd-0", "SLOTD_CLUSTER_SIZE": "1", "POD_NAMESPACE": "ns"}
        out = self.flags(env)
        self.assertEqual(out[2:6], ["--peers", "1=%s:7701" % self.name(0),
                                    "--bootstrap-expect", "1"])
        env["HOSTNAME"] = "slotd-1"  # dev scaled to 2: the second pod joins
        self.assertEqual(self.flags(env)[2:4], ["--join", self.name(0) + ":7701"])
        env = {"HOSTNAME": "slotd-4", "SLOTD_CLUSTER_SIZE": "5", "SLOTD_INITIAL_VOTERS": "5",
               "POD_NAMESPACE": "ns"}
        out = self.flags(env)
        self.assertEqual(len(out[3].split(",")), 5)
        self.assertEqual(out[3].split(",")[4], "5=%s:7701" % self.name(4))

    def test_single_node_without_cluster_size(self):
        r = self.run_entry({"HOSTNAME": "4f2a9c"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["--listen", "0.0.0.0:7700", "--data-dir", DATA_DIR])

    def test_errors(self):
        ok = {"HOSTNAME": "slotd-1", "SLOTD_CLUSTER_SIZE": "3", "POD_NAMESPACE": "ns"}
        cases = [
            ({"HOSTNAME": "slotd"}, "hostname 'slotd' does not end in -<ordinal>"),
            ({"HOSTNAME": "slotd-x"}, "hostname 'slotd-x' does not end in -<ordinal>"),
            ({"HOSTNAME": "-3"}, "hostname '-3' is not <set>-<ordinal>"),
            ({"HOSTNAME": "slotd-64"}, "ordinal 64 is not below 64"),
            ({"POD_NAMESPACE": ""}, "POD_NAMESPACE is not set"),
            ({"SLOTD_CLUSTER_SIZE": "three"}, "SLOTD_CLUSTER_SIZE='three' is not a number"),
            ({"SLOTD_CLUSTER_SIZE": "0"}, "SLOTD_CLUSTER_SIZE=0 is not in 1..64"),
            ({"SLOTD_CLUSTER_SIZE": "65"}, "SLOTD_CLUSTER_SIZE=65 is not in 1..64"),
            ({"SLOTD_INITIAL_VOTERS": "0"}, "SLOTD_INITIAL_VOTERS=0 is not at least 1"),
            ({"SLOTD_INITIAL_VOTERS": "-1"}, "SLOTD_INITIAL_VOTERS='-1' is not a number"),
            ({"SLOTD_PEER_PORT": "77o1"}, "SLOTD_PEER_PORT='77o1' is not a number"),
        ]
        for change, msg in cases:
            env = dict(ok, **change)
            r = self.run_entry(env)
            self.assertEqual(r.returncode, 2, change)
            self.assertIn("slotd-entrypoint: " + msg, r.stderr)
            self.assertEqual(r.stdout, "", change)
        env = dict(ok)
        del env["POD_NAMESPACE"]
        r = self.run_entry(env)
        self.assertEqual((r.returncode, r.stdout), (2, ""))
        self.assertIn("POD_NAMESPACE is not set (downward API metadata.namespace)", r.stderr)
        r = self.run_entry({}, args=())
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage:", r.stderr)

    def test_posix_sh(self):
        with open(ENTRYPOINT) as f:
            self.assertEqual(f.readline(), "#!/bin/sh\n")
        for sh in ("dash", "busybox"):
            path = shutil.which(sh)
            if path is None:
                continue
            cmd = [path, "sh"] if sh == "busybox" else [path]
            r = subprocess.run(cmd + [ENTRYPOINT, "echo"], capture_output=True, text=True,
                               env={"PATH": "/usr/bin:/bin", "HOSTNAME": "slotd-3",
                                    "SLOTD_CLUSTER_SIZE": "3", "POD_NAMESPACE": "ns"}, timeout=10)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("--join " + self.name(0) + ":7701", r.stdout)
        if shutil.which("shellcheck"):
            r = subprocess.run(["shellcheck", "-s", "sh", ENTRYPOINT], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout)

    def test_rendered_pods_get_consistent_flags(self):
        """Each overlay's container (env, args) through the entrypoint, as slotd-0 and as the
        first pod `kubectl scale` adds: the flags are slotd options and the ports they name are
        the container's."""
        known, _ = ops.slotd_options()
        for overlay in overlays():
            r = Rendered(overlay)
            env = {e["name"]: e["value"] for e in r.container["env"] if "value" in e}
            env["POD_NAMESPACE"] = "slotd"
            for ordinal in (0, r.sts["spec"]["replicas"]):
                with self.subTest(overlay=overlay, ordinal=ordinal):
                    env["HOSTNAME"] = "slotd-%d" % ordinal
                    res = self.run_entry(env, args=["slotd"] + r.container["args"])
                    self.assertEqual(res.returncode, 0, res.stderr)
                    flags = ops.flags_of(res.stdout.splitlines())
                    for f in flags:
                        self.assertIn(f, known)
                    self.assertEqual(port_of(flags["--advertise"]), r.ports["client"])
                    self.assertEqual(port_of(flags["--peer-advertise"]), r.ports["peer"])
                    self.assertEqual(flags["--node-id"], str(ordinal + 1))
                    if ordinal == 0:
                        peers = flags["--peers"].split(",")
                        self.assertEqual(len(peers), min(3, r.sts["spec"]["replicas"]))
                        self.assertEqual({port_of(p) for p in peers}, {r.ports["peer"]})
                        self.assertNotIn("--join", flags)
                    else:
                        self.assertEqual(flags["--join"],
                                         "slotd-0.slotd-headless.slotd.svc.cluster.local:%d"
                                         % r.ports["peer"])
                        self.assertNotIn("--peers", flags)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveProbeTest(unittest.TestCase):
    """The dev overlay's args on a real slotd (ports moved to free ones on 127.0.0.1): its probes
    answer SERVING and its metrics port serves /metrics."""

    POLL_S = 20.0

    def test_dev_probes_and_metrics_on_a_real_slotd(self):
        slotd = ops.slotd_bin()
        health = os.path.join(os.path.dirname(slotd), "slotd-health")
        for b in (slotd, health):
            if not os.access(b, os.X_OK):
                self.skipTest("not built: %s (set SLOTD_BIN)" % b)
        r = Rendered("dev")
        moved = {r.ports[n]: free_port() for n in ("client", "peer", "metrics")}
        tmp = tempfile.mkdtemp(prefix="slotd-k8s-")
        self.addCleanup(shutil.rmtree, tmp)
        args = []
        for a in r.container["args"]:
            if a.startswith("0.0.0.0:"):
                a = "127.0.0.1:%d" % moved[port_of(a)]
            args.append(os.path.join(tmp, "data") if a == DATA_DIR else a)
        p = subprocess.Popen([slotd] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(p.wait, 10)
        self.addCleanup(p.kill)
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            g = r.container[kind]["grpc"]
            addr = "127.0.0.1:%d" % moved[g["port"]]
            deadline = time.monotonic() + self.POLL_S
            while True:
                h = subprocess.run([health, addr, g.get("service", "")], capture_output=True,
                                   text=True, timeout=10)
                if h.returncode == 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            self.assertEqual((h.returncode, h.stdout.strip()), (0, "SERVING"), kind)
        sm_path = Rendered("prod").of_kind("ServiceMonitor")[0]["spec"]["endpoints"][0]["path"]
        url = "http://127.0.0.1:%d%s" % (moved[METRICS_PORT], sm_path)
        with urllib.request.urlopen(url, timeout=5) as resp:
            self.assertEqual(resp.status, 200)
            self.assertIn("slotd_build_info", resp.read().decode())


class DocsTest(unittest.TestCase):
    """docs/kubernetes.md's commands against the rendered manifests and the programs' --help."""

    @classmethod
    def setUpClass(cls):
        with open(K8S_MD) as f:
            cls.text = f.read()
        cls.code = "\n".join(b for lang, b in ops.code_blocks(K8S_MD) if lang == "sh")
        cls.prod = Rendered("prod")

    def test_first_line_and_index(self):
        self.assertRegex(self.text.splitlines()[0], r"^<!-- docs/kubernetes\.md - ")
        with open(os.path.join(REPO, "docs", "README.md")) as f:
            self.assertIn("`kubernetes.md`", f.read())

    def test_applied_overlays_exist(self):
        applied = re.findall(r"kubectl -n (\S+) apply -k (\S+)", self.code)
        self.assertEqual({os.path.basename(p) for _, p in applied}, set(overlays()))
        for ns, path in applied:
            self.assertTrue(os.path.isfile(os.path.join(REPO, path, "kustomization.yaml")), path)
            self.assertIn("kubectl create namespace %s" % ns, self.code)

    def test_secrets_created_are_the_ones_prod_mounts(self):
        created = set()
        for name, rest in re.findall(r"kubectl -n slotd create secret generic (\S+)((?: --from-file=\S+)+)",
                                     self.code):
            created |= {(name, k) for k in re.findall(r"--from-file=(\S+)", rest)}
        self.assertEqual(created, PROD_SECRETS)
        # The files the walkthrough's slotctl in a pod reads are the prod mounts.
        for path in re.findall(r"(/etc/slotd/\S+)", self.code):
            self.assertIsNotNone(secret_file(self.prod, path), path)

    def test_certificate_sans_cover_the_names_used(self):
        (ext,) = re.findall(r"subjectAltName=([^\\]+)\\n", self.code)
        sans = {s.replace("DNS:", "") for s in ext.split(",")}
        headless = self.prod.sts["spec"]["serviceName"]
        self.assertIn("*.%s.%%s.svc.cluster.local" % headless, sans)
        self.assertIn("localhost", sans)
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            cmd = self.prod.container[kind]["exec"]["command"]
            self.assertEqual(cmd[cmd.index("--tls-server-name") + 1], "localhost")
        self.assertIn("--tls-server-name localhost", self.code)

    def test_slotctl_flags_exist(self):
        known = ops.slotctl_flags()
        uses = [(f, c) for p, f, c in ops.doc_flag_uses(K8S_MD) if p == "slotctl"]
        self.assertGreater(len(uses), 5)
        for flag, cmd in uses:
            self.assertIn(flag, known, cmd)

    def test_scale_down_drains_the_removed_ordinals_and_deletes_their_claims(self):
        (vct,) = self.prod.sts["spec"]["volumeClaimTemplates"]
        ups = [int(n) for n in re.findall(r"kubectl -n slotd scale statefulset/slotd --replicas (\d+)",
                                         self.code)]
        self.assertEqual(ups, [5, 3])
        self.assertEqual(self.prod.sts["spec"]["replicas"], 3)
        drained = [int(n) for n in re.findall(r" drain --node (\d+) --wait 600", self.code)]
        # Node N+1 is ordinal N; scaling 5 -> 3 removes ordinals 4 and 3.
        self.assertEqual(sorted(drained), [4, 5])
        voters = int(self.prod.env_value("SLOTD_INITIAL_VOTERS"))
        self.assertTrue(all(n > voters for n in drained))
        self.assertLess(self.code.index("drain --node 4"), self.code.index("--replicas 3"))
        (pvcs,) = re.findall(r"kubectl -n slotd delete pvc (.+)", self.code)
        self.assertEqual(sorted(pvcs.split()),
                         ["%s-%s-%d" % (vct["metadata"]["name"], self.prod.sts["metadata"]["name"],
                                        n - 1) for n in sorted(drained)])
        self.assertLess(self.code.index("--replicas 3"), self.code.index("delete pvc"))

    def test_port_forward_uses_the_client_service_port(self):
        for svc, local, remote in re.findall(r"port-forward svc/(\S+) (\d+):(\d+)", self.code):
            ports = [p["port"] for p in self.prod.service(svc)["spec"]["ports"]]
            self.assertEqual(ports, [int(remote)])
            self.assertIn("--endpoints 127.0.0.1:%s" % local, self.code)
