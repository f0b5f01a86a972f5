# test_tls.py - TLS and mTLS end to end: certificates made by openssl, slotd and every client.
"""slotd with --tls-cert/--tls-key (server TLS) and --tls-ca/--tls-client-auth 1 (mTLS): TLS
clients connect and write, plaintext clients and clients without a certificate are refused, a
3-node cluster with mTLS between its nodes elects leaders and forwards writes, slotctl round trips
with --tls-ca/--tls-cert/--tls-key, and bad TLS options stop slotd with a sentence naming them.
The other clients against an mTLS node (ClientsTlsTest): slotbench, slotd-health, the Python
client (clients/python, root_certificates/private_key/certificate_chain) and the Node example
(clients/node, --tls-* flags) each connect with good certificates and are refused with only the
CA (no client certificate) and over plaintext; bad TLS options are usage errors (exit 2).

Certificates are made per test class in a temp dir with Debian's openssl CLI: a CA, a server
certificate (SAN IP:127.0.0.1 and DNS:localhost), one certificate per cluster node (the same SANs
plus DNS:node-<id>; serverAuth and clientAuth, since nodes present them to each other and the peer
plane checks the node-<id> name) and a client certificate. In the mTLS cluster a CA-signed
certificate without a node name, or one whose node disagrees with the cluster-secret proof, is
refused on Peer methods (UNAUTHENTICATED). The harness polls health over plaintext, so TlsServer
overrides its channel to use TLS credentials."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402

OPENSSL = shutil.which("openssl")
SLOTCTL_BIN = os.environ.get("SLOTCTL_BIN", str(h.SLOTD_BIN.parent / "slotctl"))
SLOTBENCH_BIN = os.environ.get("SLOTBENCH_BIN", str(h.SLOTD_BIN.parent / "slotbench"))
HEALTH_BIN = os.environ.get("SLOTD_HEALTH_BIN", str(h.SLOTD_BIN.parent / "slotd-health"))
NODE_DIR = h.REPO / "clients" / "node"
sys.path.insert(0, str(h.REPO / "clients" / "python"))
from slotd_client import Client, SlotdError  # noqa: E402
REFUSED_TIMEOUT_S = 3.0
PEER_CONNECT_S = 5.0  # a Peer call that did not reach the node (UNAVAILABLE) is made again
RUN_TIMEOUT_S = 30.0
NODE_CERTS = (1, 2, 3)  # node-<id> certificates make_certs makes


def _openssl(workdir, *args):
    proc = subprocess.run([OPENSSL] + list(args), cwd=str(workdir), capture_output=True,
                          text=True, timeout=30)
    if proc.returncode != 0:
        raise AssertionError("openssl %s failed: %s" % (" ".join(args), proc.stderr))


def make_certs(workdir):
    """CA, server and client key pairs in workdir; returns {name: Path} of the PEM files."""
    d = Path(workdir)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(d, "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=slotd-test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    (d / "server.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    (d / "client.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\nsubjectAltName=DNS:slotd-test-client\n")
    for n in NODE_CERTS:  # one per cluster node: the peer plane checks the node-<id> name
        (d / ("node-%d.ext" % n)).write_text(
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth,clientAuth\n"
            "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:node-%d\n" % n)
    named = [("server", "localhost"), ("client", "slotd-test-client")]
    for name, cn in named + [("node-%d" % n, "node-%d" % n) for n in NODE_CERTS]:
        _openssl(d, "req", "-new", *ec, "-keyout", name + ".key", "-out", name + ".csr",
                 "-subj", "/CN=" + cn)
        _openssl(d, "x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile",
                 name + ".ext")
    # A self-signed client certificate no CA of ours vouches for.
    _openssl(d, "req", "-x509", *ec, "-keyout", "rogue.key", "-out", "rogue.pem", "-days", "2",
             "-subj", "/CN=rogue", "-addext", "extendedKeyUsage=clientAuth")
    names = ["ca.pem", "server.pem", "server.key", "client.pem", "client.key", "rogue.pem",
             "rogue.key"] + ["node-%d.%s" % (n, x) for n in NODE_CERTS for x in ("pem", "key")]
    return {n: d / n for n in names}


def creds(certs, client=None, ca="ca.pem"):
    """SSL channel credentials trusting ca; with client ("client" or "rogue") presenting that
    certificate."""
    root = certs[ca].read_bytes()
    if client is None:
        return grpc.ssl_channel_credentials(root_certificates=root)
    return grpc.ssl_channel_credentials(root_certificates=root,
                                        private_key=certs[client + ".key"].read_bytes(),
                                        certificate_chain=certs[client + ".pem"].read_bytes())


def tls_args(certs, client_auth=False, cert="server"):
    args = ["--tls-cert", str(certs[cert + ".pem"]), "--tls-key", str(certs[cert + ".key"]),
            "--tls-ca", str(certs["ca.pem"])]
    return args + (["--tls-client-auth", "1"] if client_auth else [])


class TlsServer(h.SlotdServer):
    """A SlotdServer whose own channel (health polling, .stub, .health) uses channel_creds."""

    def __init__(self, workdir, channel_creds, **kwargs):
        super().__init__(workdir, **kwargs)
        self.channel_creds = channel_creds

    def _open_channel(self):
        self.channel = grpc.secure_channel(self.addr, self.channel_creds,
                                           options=h.CHANNEL_OPTIONS)
        self.peer_channel = grpc.secure_channel(self.peer_addr, self.channel_creds,
                                                options=h.CHANNEL_OPTIONS)
        self.stub = h.pb_grpc.MetadataStub(self.channel)
        self.health = h.health_pb2_grpc.HealthStub(self.channel)


@unittest.skipIf(OPENSSL is None, "the openssl CLI is not installed")
class TlsTest(h.SlotdTestCase):
    certs = None
    _certdir = None

    @classmethod
    def setUpClass(cls):
        cls._certdir = tempfile.mkdtemp(prefix="slotd-e2e-certs-")
        cls.certs = make_certs(cls._certdir)

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls._certdir, ignore_errors=True)

    def tls_server(self, channel_creds, extra_args):
        if getattr(self, "_workdir", None) is None:
            self._workdir = tempfile.mkdtemp(prefix="slotd-e2e-")
        server = TlsServer(self._workdir, channel_creds, name="slotd%d" % len(self._servers),
                           extra_args=extra_args)
        self._servers.append(server)
        return server.start()

    def assertRefused(self, channel):
        """A Propose on channel fails (the connection never gets through the handshake)."""
        try:
            stub = h.pb_grpc.MetadataStub(channel)
            with self.assertRaises(grpc.RpcError) as ctx:
                h.put(stub, b"tls/refused", b"x", timeout=REFUSED_TIMEOUT_S)
            self.assertIn(ctx.exception.code(),
                          (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED))
        finally:
            channel.close()

    def round_trip(self, stub, key, value):
        made = h.put(stub, key, value)
        self.assertGreater(made.applied_index, 0)
        got = h.get(stub, key)
        self.assertTrue(got.get.found)
        self.assertEqual(got.get.value, value)

    # ---- one node ---------------------------------------------------------------------------

    def test_server_tls(self):
        server = self.tls_server(creds(self.certs), tls_args(self.certs))
        self.assertIn("tls=on", server.log_text())
        self.round_trip(server.stub, h.unique_key("tls/one"), b"over tls")
        self.assertRefused(h.open_channel(server.addr))  # plaintext
        # A TLS client that does not trust our CA (its roots are the rogue self-signed cert).
        self.assertRefused(grpc.secure_channel(server.addr, creds(self.certs, ca="rogue.pem")))

    def test_mtls_client_auth(self):
        server = self.tls_server(creds(self.certs, client="client"),
                                 tls_args(self.certs, client_auth=True))
        self.assertIn("tls=mtls", server.log_text())
        self.round_trip(server.stub, h.unique_key("tls/mtls"), b"with a client cert")
        self.assertRefused(grpc.secure_channel(server.addr, creds(self.certs)))  # no cert
        self.assertRefused(grpc.secure_channel(server.addr, creds(self.certs, client="rogue")))
        self.assertRefused(h.open_channel(server.addr))
        # A second channel with the client certificate works too (not just the harness's).
        channel = grpc.secure_channel(server.addr, creds(self.certs, client="client"))
        try:
            self.round_trip(h.pb_grpc.MetadataStub(channel), h.unique_key("tls/mtls2"), b"again")
        finally:
            channel.close()

    def test_slotctl_tls(self):
        server = self.tls_server(creds(self.certs, client="client"),
                                 tls_args(self.certs, client_auth=True))
        tls = ["--tls-ca", str(self.certs["ca.pem"]), "--tls-cert", str(self.certs["client.pem"]),
               "--tls-key", str(self.certs["client.key"])]
        key = h.unique_key("tls/slotctl").decode()

        def slotctl(*args):
            proc = subprocess.run([SLOTCTL_BIN, "--endpoints", server.addr, "--deadline-ms",
                                   "2000", "--max-retries", "1"] + list(args),
                                  capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
            return proc.returncode, proc.stdout, proc.stderr

        code, out, err = slotctl(*tls, "put", key, "via slotctl")
        self.assertEqual(code, 0, err)
        code, out, err = slotctl(*tls, "get", key)
        self.assertEqual(code, 0, err)
        self.assertIn("VALUE    via slotctl", out)
        # The name override: the certificate's DNS SAN "localhost" while dialling 127.0.0.1.
        code, out, err = slotctl(*tls, "--tls-server-name", "localhost", "get", key)
        self.assertEqual(code, 0, err)
        code, out, err = slotctl(*tls, "--tls-server-name", "not-the-server", "get", key)
        self.assertEqual(code, 4, out + err)  # unavailable: the name check fails
        code, out, err = slotctl("--tls-ca", str(self.certs["ca.pem"]), "get", key)
        self.assertEqual(code, 4, out + err)  # no client certificate
        code, out, err = slotctl("get", key)
        self.assertEqual(code, 4, out + err)  # plaintext
        code, out, err = slotctl("--tls-ca", "/nonexistent/ca.pem", "get", key)
        self.assertEqual(code, 2, out + err)
        self.assertIn("tls_ca_file: cannot open /nonexistent/ca.pem", err)
        code, out, err = slotctl("--tls-cert", str(self.certs["client.pem"]), "get", key)
        self.assertEqual(code, 2, out + err)
        self.assertIn("--tls-key", err)

    def test_bad_options_refused(self):
        workdir = Path(tempfile.mkdtemp(prefix="slotd-e2e-"))
        try:
            c = self.certs
            cases = [
                (["--tls-cert", str(c["server.pem"])], "--tls-key"),
                (["--tls-cert", str(c["server.pem"]), "--tls-key", "/nonexistent/k.pem"],
                 "tls_key: cannot open /nonexistent/k.pem"),
                (["--tls-cert", str(c["server.pem"]), "--tls-key", str(c["server.key"]),
                  "--tls-client-auth", "1"], "--tls-ca"),
                (["--tls-ca", str(c["ca.pem"])], "need --tls-cert"),
                (["--tls-cert", str(c["server.pem"]), "--tls-key", str(workdir / "notpem")],
                 "tls_key: %s holds no PEM block" % (workdir / "notpem")),
            ]
            (workdir / "notpem").write_text("not a pem file\n")
            for args, needle in cases:
                proc = subprocess.run([str(h.SLOTD_BIN), "--listen", "127.0.0.1:0", "--data-dir",
                                       str(workdir / "data"), "--metrics-listen", ""] + args,
                                      capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
                self.assertEqual(proc.returncode, 2, "%s: %s" % (args, proc.stderr))
                self.assertIn(needle, proc.stderr, args)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    # ---- a cluster --------------------------------------------------------------------------

    def test_cluster_mtls(self):
        self.check_cluster_mtls([])

    def test_cluster_mtls_server_name(self):
        # Peers dial 127.0.0.1:port and check the certificate's DNS SAN "localhost" instead.
        self.check_cluster_mtls(["--tls-server-name", "localhost"])

    def check_cluster_mtls(self, more_args):
        if getattr(self, "_workdir", None) is None:
            self._workdir = tempfile.mkdtemp(prefix="slotd-e2e-")
        node_args = {n: tls_args(self.certs, client_auth=True, cert="node-%d" % n) + more_args
                     for n in NODE_CERTS}
        cluster = h.SlotdCluster(self._workdir, name="tls%d" % len(self._servers),
                                 node_args=node_args)
        for node_id in cluster.node_ids:
            cluster.servers[node_id] = TlsServer(self._workdir, creds(self.certs, client="client"),
                                                 name=cluster.servers[node_id].name)
        self._servers.extend(cluster.servers.values())
        cluster.start()
        route = cluster.wait_leaders()
        leaders = cluster.leaders(route)
        forwarded = 0
        for node_id in cluster.node_ids:  # every group through every node
            for group_id in cluster.group_ids:
                key = h.key_in_group(cluster.table, group_id, "tls/cluster/n%d" % node_id)
                self.round_trip(cluster.stub(node_id), key, b"node %d" % node_id)
                forwarded += leaders[group_id] != node_id
        self.assertGreater(forwarded, 0, "every write went to its leader: nothing was forwarded")
        for node_id in cluster.node_ids:
            self.assertIn("tls=mtls peer_auth=secret+mtls", cluster.server(node_id).log_text())
        # The peers' mTLS port refuses a node-less plaintext client as well.
        self.assertRefused(h.open_channel(cluster.peer_addr(1)))
        # A client certificate the CA signed but that names no node is not a node, even with a
        # valid proof of the cluster secret.
        err = self.peer_answer(lambda: cluster.server(1).peer_call(
            "/slotd.internal.v1.Peer/GroupStatus", b"", node=2))
        self.assertIsNotNone(err, "a certificate naming no node was accepted")
        self.assertEqual(err.code(), grpc.StatusCode.UNAUTHENTICATED)
        self.assertIn("names no node", err.details())
        # A node-2 certificate with a proof claiming node 3: the two identities disagree.
        channel = grpc.secure_channel(cluster.peer_addr(1), creds(self.certs, client="node-2"))
        try:
            err = self.peer_answer(lambda: h.peer_unary(
                channel, "/slotd.internal.v1.Peer/GroupStatus", b"", 3, 1))
            self.assertIsNotNone(err, "a proof claiming another node than the certificate passed")
            self.assertEqual(err.code(), grpc.StatusCode.UNAUTHENTICATED)
            self.assertIn("certificate names node 2", err.details())
            self.assertIsNone(self.peer_answer(lambda: h.peer_unary(
                channel, "/slotd.internal.v1.Peer/GroupStatus", b"", 2, 1)))  # agrees
        finally:
            channel.close()

    def peer_answer(self, call):
        """The node's answer to call(): None when it succeeded, else its grpc.RpcError. A call
        that never reached the node (UNAVAILABLE: the channel's TLS connection not up yet or in
        its reconnect backoff on a loaded machine) is made again for up to PEER_CONNECT_S."""
        end = time.monotonic() + PEER_CONNECT_S
        while True:
            try:
                call()
                return None
            except grpc.RpcError as err:
                if err.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > end:
                    return err
            time.sleep(0.2)


@unittest.skipIf(OPENSSL is None, "the openssl CLI is not installed")
class ClientsTlsTest(h.SlotdTestCase):
    """slotbench, slotd-health, the Python client and the Node example against one mTLS node."""

    @classmethod
    def setUpClass(cls):
        cls._certdir = tempfile.mkdtemp(prefix="slotd-e2e-certs-")
        cls.certs = make_certs(cls._certdir)
        cls._class_workdir = tempfile.mkdtemp(prefix="slotd-e2e-")
        cls._class_servers = []
        server = TlsServer(cls._class_workdir, creds(cls.certs, client="client"),
                           name="mtls-clients", extra_args=tls_args(cls.certs, client_auth=True))
        cls._class_servers.append(server)
        try:
            cls.server = server.start()
        except BaseException:
            server.kill()
            raise

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls._certdir, ignore_errors=True)

    def flags(self, which):
        """--tls-* flags: "mtls" (CA + client pair), "ca" (CA only), "plain" (none)."""
        c = self.certs
        if which == "plain":
            return []
        ca = ["--tls-ca", str(c["ca.pem"])]
        return ca if which == "ca" else ca + ["--tls-cert", str(c["client.pem"]), "--tls-key",
                                              str(c["client.key"])]

    def run_bin(self, *cmd):
        proc = subprocess.run([str(a) for a in cmd], capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)
        return proc.returncode, proc.stdout, proc.stderr

    def test_slotbench(self):
        def bench(*extra):
            return self.run_bin(SLOTBENCH_BIN, "--endpoints", self.server.addr, "--op", "put",
                                "--concurrency", 2, "--keys", 50, "--key-size", 16, "--duration",
                                2, "--ops", 40, "--connect-timeout-ms", 2000, "--json", *extra)
        code, out, err = bench(*self.flags("mtls"))
        self.assertEqual(code, 0, err)
        run = json.loads(out)["run"]
        self.assertEqual((run["ok"], run["errors_total"]), (40, 0), out)
        code, out, err = bench(*self.flags("mtls"), "--tls-server-name", "localhost")
        self.assertEqual(code, 0, err)
        for which in ("ca", "plain"):
            code, out, err = bench(*self.flags(which))
            self.assertEqual(code, 1, "%s: %s" % (which, out + err))
            self.assertIn("could not connect", err)
        code, out, err = bench(*self.flags("mtls"), "--tls-server-name", "not-the-server")
        self.assertEqual(code, 1, out + err)
        code, out, err = bench("--tls-ca", "/nonexistent/ca.pem")
        self.assertEqual(code, 2, out + err)
        self.assertIn("--tls-ca: cannot open /nonexistent/ca.pem", err)
        code, out, err = bench("--tls-cert", str(self.certs["client.pem"]))
        self.assertEqual(code, 2, out + err)
        self.assertIn("--tls-cert and --tls-key: give both or neither", err)

    def test_slotd_health(self):
        code, out, err = self.run_bin(HEALTH_BIN, *self.flags("mtls"), self.server.addr)
        self.assertEqual((code, out.strip()), (0, "SERVING"), err)
        code, out, err = self.run_bin(HEALTH_BIN, self.server.addr, *self.flags("mtls"),
                                      "--tls-server-name", "localhost")
        self.assertEqual((code, out.strip()), (0, "SERVING"), err)
        for which in ("ca", "plain"):
            code, out, err = self.run_bin(HEALTH_BIN, *self.flags(which), self.server.addr)
            self.assertEqual(code, 1, "%s: %s" % (which, out + err))
            self.assertNotIn("SERVING", out)
        code, out, err = self.run_bin(HEALTH_BIN, "--tls-key", str(self.certs["client.key"]),
                                      self.server.addr)
        self.assertEqual(code, 2, err)
        self.assertIn("--tls-cert and --tls-key", err)
        code, out, err = self.run_bin(HEALTH_BIN, "--tls-ca", "/nonexistent/ca.pem",
                                      self.server.addr)
        self.assertEqual(code, 2, err)
        self.assertIn("--tls-ca: cannot open /nonexistent/ca.pem", err)

    def test_python_client(self):
        c = self.certs
        key = h.unique_key("tls/python")
        with Client(self.server.addr, deadline=3.0, max_retries=0,
                    root_certificates=c["ca.pem"].read_bytes(),
                    private_key=c["client.key"].read_bytes(),
                    certificate_chain=c["client.pem"].read_bytes()) as client:
            w = client.put(key, b"over mtls")
            self.assertGreater(w.applied_index, 0)
            self.assertEqual(client.get(key).get.value, b"over mtls")
        # Paths work too, and the server-name override.
        with Client(self.server.addr, deadline=3.0, max_retries=0, root_certificates=c["ca.pem"],
                    private_key=c["client.key"], certificate_chain=c["client.pem"],
                    server_name="localhost") as client:
            self.assertEqual(client.get(key).get.value, b"over mtls")
        for kwargs in ({"root_certificates": c["ca.pem"]}, {}):
            with Client(self.server.addr, deadline=2.0, max_retries=0, **kwargs) as client:
                with self.assertRaises(SlotdError) as ctx:
                    client.get(key)
                self.assertIn(ctx.exception.code, (grpc.StatusCode.UNAVAILABLE,
                                                   grpc.StatusCode.DEADLINE_EXCEEDED), kwargs)
        with self.assertRaises(ValueError):
            Client(self.server.addr, private_key=c["client.key"])
        with self.assertRaises(ValueError):
            Client(self.server.addr, server_name="localhost")

    def test_node_example(self):
        node = shutil.which("node")
        if node is None or not (NODE_DIR / "node_modules" / "@grpc" / "grpc-js").is_dir():
            self.skipTest("node or clients/node/node_modules missing (test_clients.py runs "
                          "npm ci)")
        key = h.unique_key("tls/node").decode()

        def example(*extra):
            return self.run_bin(node, NODE_DIR / "example.js", "--addr", self.server.addr,
                                "--key", key, "--value", "node over mtls", *extra)
        code, out, err = example(*self.flags("mtls"))
        self.assertEqual(code, 0, err)
        self.assertIn("get %s: found=true value='node over mtls'" % key, out)
        code, out, err = example(*self.flags("mtls"), "--tls-server-name", "localhost")
        self.assertEqual(code, 0, err)
        for which in ("ca", "plain"):
            code, out, err = example(*self.flags(which))
            self.assertEqual(code, 1, "%s: %s" % (which, out + err))
            self.assertRegex(err, r"example: (UNAVAILABLE|DEADLINE_EXCEEDED)")
        code, out, err = example("--tls-cert", str(self.certs["client.pem"]))
        self.assertEqual(code, 2, err)


if __name__ == "__main__":
    unittest.main()
