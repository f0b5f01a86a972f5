# test_lincheck.py - unit tests of the linearizability checker alone (no server).
import os
import random
import sys
import tempfile
import json
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lincheck as lc  # noqa: E402
from lincheck import Op  # noqa: E402


def put(key, value, version, t0, t1, client=0, prev=None):
    out = None if t1 is None else {"version": version}
    if out is not None and prev is not None:
        out["prev_version"] = prev
    return Op("put", key, {"value": value}, out, t0, t1, client)


def get(key, found, value, version, t0, t1, client=0):
    return Op("get", key, {}, {"found": found, "value": value, "version": version}, t0, t1, client)


def cas(key, expected, value, ok, version, t0, t1, client=0):
    out = None if t1 is None else {"ok": ok, "version": version}
    return Op("cas", key, {"expected": expected, "value": value}, out, t0, t1, client)


def delete(key, deleted, t0, t1, client=0, index=None):
    out = None if t1 is None else {"deleted": deleted}
    if out is not None and index is not None:
        out["index"] = index
    return Op("delete", key, {}, out, t0, t1, client)


class AcceptTest(unittest.TestCase):
    def assertOk(self, history):
        rep = lc.check(history)
        self.assertTrue(rep.ok, rep.summary() + " " + json.dumps(rep.to_dict()))

    def test_empty(self):
        self.assertOk([])

    def test_sequential(self):
        self.assertOk([
            get("k", False, None, 0, 0, 1),
            put("k", "a", 5, 2, 3, prev=0),
            get("k", True, "a", 5, 4, 5),
            cas("k", 5, "b", True, 9, 6, 7),
            cas("k", 5, "c", False, 9, 8, 9),
            get("k", True, "b", 9, 10, 11),
            delete("k", True, 12, 13, index=12),
            get("k", False, None, 0, 14, 15),
            cas("k", 0, "d", True, 20, 16, 17),
            get("k", True, "d", 20, 18, 19),
        ])

    def test_concurrent_overlapping(self):
        # two writes overlap; reads during the overlap may see either order, consistent later
        self.assertOk([
            put("k", "a", 3, 0, 10, client=1),
            put("k", "b", 4, 1, 9, client=2),
            get("k", True, "a", 3, 2, 3, client=3),   # a linearized first, b later
            get("k", True, "b", 4, 11, 12, client=3),
        ])
        self.assertOk([
            put("k", "a", 4, 0, 10, client=1),
            put("k", "b", 3, 1, 9, client=2),
            get("k", True, "b", 3, 2, 3, client=3),
            get("k", True, "a", 4, 5, 6, client=4),
            get("k", True, "a", 4, 11, 12, client=3),
        ])

    def test_maybe_write_happened(self):
        # the put timed out, but its value shows up later with its version
        self.assertOk([
            put("k", "a", 3, 0, 1),
            put("k", "b", None, 2, None, client=1),
            get("k", True, "b", 7, 10, 11),
            put("k", "c", 9, 12, 13),
            get("k", True, "c", 9, 14, 15),
        ])

    def test_maybe_write_did_not_happen(self):
        self.assertOk([
            put("k", "a", 3, 0, 1),
            put("k", "b", None, 2, None, client=1),
            get("k", True, "a", 3, 10, 11),
            get("k", True, "a", 3, 12, 13),
        ])

    def test_maybe_write_happens_late(self):
        # unknown outcome: may take effect long after everything that returned
        self.assertOk([
            put("k", "a", 3, 0, 1),
            put("k", "b", None, 2, None, client=1),
            get("k", True, "a", 3, 10, 11),
            get("k", True, "b", 8, 12, 13),
        ])

    def test_maybe_cas_and_delete(self):
        self.assertOk([
            put("k", "a", 3, 0, 1),
            cas("k", 3, "b", None, None, 2, None, client=1),
            delete("k", None, 2, None, client=2),
            get("k", True, "b", 6, 5, 6),
            get("k", False, None, 0, 7, 8),
            cas("k", 0, "c", True, 11, 9, 10),
        ])

    def test_maybe_write_version_learned_by_cas_failure(self):
        self.assertOk([
            put("k", "a", 3, 0, 1),
            put("k", "b", None, 2, None, client=1),
            cas("k", 3, "x", False, 6, 5, 6),
            cas("k", 6, "y", True, 8, 7, 8),
            get("k", True, "y", 8, 9, 10),
        ])

    def test_keys_are_independent(self):
        self.assertOk([
            put("k1", "a", 3, 0, 1),
            put("k2", "a", 2, 0, 1),
            get("k1", True, "a", 3, 2, 3),
            get("k2", True, "a", 2, 2, 3),
        ])

    def test_random_sequential_histories_pass(self):
        rng = random.Random(7)
        for _ in range(30):
            history, t, index = [], 0.0, 0
            state = {}
            for _ in range(60):
                key = rng.choice("abc")
                kind = rng.choice(["put", "get", "cas", "delete"])
                t0, t1 = t, t + 0.5
                t += 1
                cur = state.get(key)
                if kind == "get":
                    history.append(get(key, cur is not None, cur[0] if cur else None,
                                       cur[1] if cur else 0, t0, t1))
                    continue
                index += rng.randint(1, 3)
                if kind == "put":
                    history.append(put(key, "v%d" % index, index, t0, t1))
                    state[key] = ("v%d" % index, index)
                elif kind == "delete":
                    history.append(delete(key, cur is not None, t0, t1, index=index))
                    state.pop(key, None)
                else:
                    expected = rng.choice([cur[1] if cur else 0, 1])
                    ok = expected == (cur[1] if cur else 0)
                    if ok:
                        state[key] = ("v%d" % index, index)
                    history.append(cas(key, expected, "v%d" % index, ok,
                                       index if ok else (cur[1] if cur else 0), t0, t1))
            self.assertOk(history)


class RejectTest(unittest.TestCase):
    def assertViolation(self, history, max_ops=4):
        rep = lc.check(history)
        bad = [k for k, r in rep.results.items() if r == lc.VIOLATION]
        self.assertTrue(bad, rep.summary())
        for key in bad:
            minimal = rep.violations[key]
            self.assertLessEqual(len(minimal), max_ops, "minimal sub-history too big: %r"
                                 % minimal)
            # the minimal sub-history fails on its own
            self.assertEqual(lc.check_key(minimal), lc.VIOLATION)
        with tempfile.TemporaryDirectory() as tmp:
            path = lc.write_violation(rep, os.path.join(tmp, "v.json"), echo=False)
            with open(path) as f:
                self.assertIn("violations", json.load(f))
        return rep

    def noise(self, key="k", n=20, start=100.0):
        """Unrelated valid traffic after the interesting part (must be shrunk away)."""
        ops = []
        for i in range(n):
            ops.append(get(key + "x", False, None, 0, start + i, start + i + 0.5, client=9))
        return ops

    def test_stale_read(self):
        self.assertViolation([
            put("k", "a", 3, 0, 1),
            put("k", "b", 5, 2, 3),
            get("k", True, "a", 3, 4, 5),
            get("k", True, "b", 5, 6, 7),
            get("k", True, "b", 5, 8, 9),
        ] + self.noise(), max_ops=3)

    def test_lost_acknowledged_write(self):
        rep = self.assertViolation([
            put("k", "a", 3, 0, 1),
            get("k", True, "a", 3, 1.5, 1.7),
            put("k", "b", 5, 2, 3, client=1),
            put("k", "m", None, 2.5, None, client=2),   # maybe op: still no excuse
            get("k", True, "a", 3, 10, 11),
        ], max_ops=3)
        self.assertEqual(sorted(op.kind for op in list(rep.violations.values())[0]),
                         ["get", "put", "put"])

    def test_read_of_value_never_written(self):
        self.assertViolation([
            put("k", "a", 3, 0, 1),
            get("k", True, "zz", 4, 2, 3),
        ], max_ops=2)

    def test_read_of_absent_key_after_write(self):
        self.assertViolation([
            put("k", "a", 3, 0, 1),
            get("k", False, None, 0, 2, 3),
        ], max_ops=2)

    def test_cas_succeeded_against_wrong_version(self):
        self.assertViolation([
            put("k", "a", 3, 0, 1),
            put("k", "b", 5, 2, 3),
            cas("k", 3, "c", True, 7, 4, 5),
            get("k", True, "c", 7, 6, 7),
        ] + self.noise(), max_ops=3)

    def test_cas_failed_though_version_matched(self):
        self.assertViolation([
            put("k", "a", 3, 0, 1),
            cas("k", 3, "c", False, 3, 4, 5),
        ], max_ops=2)

    def test_versions_going_backwards(self):
        self.assertViolation([
            put("k", "a", 9, 0, 1),
            put("k", "b", 5, 2, 3),
        ], max_ops=2)

    def test_read_version_mismatch(self):
        self.assertViolation([
            put("k", "a", 9, 0, 1),
            get("k", True, "a", 8, 2, 3),
        ], max_ops=2)

    def test_delete_of_absent_reported_deleted(self):
        self.assertViolation([
            delete("k", True, 0, 1),
        ], max_ops=1)

    def test_writes_applied_against_index_order(self):
        # b and c overlap; a reader sees c (index 5) and then b (index 4): order reversed
        self.assertViolation([
            put("k", "b", 4, 0, 10, client=1),
            put("k", "c", 5, 0, 10, client=2),
            get("k", True, "c", 5, 1, 2, client=3),
            get("k", True, "b", 4, 3, 4, client=3),
        ], max_ops=4)

    def test_stale_read_among_many_overlapping_reads_is_fast(self):
        # 300 overlapping reads (one stale) and a few maybe writes: must finish well within the
        # budget (needs the read optimisation) and shrink to put, put, stale get
        history = [put("k", "a", 3, 0, 1), put("k", "b", 5, 2, 3)]
        history += [put("k", "m%d" % i, None, 3.5 + i * 0.01, None, client=10 + i)
                    for i in range(4)]
        history += [get("k", True, "b", 5, 4 + i * 0.001, 9, client=20 + i) for i in range(300)]
        history.append(get("k", True, "a", 3, 4.5, 8, client=400))
        rep = lc.check(history, time_budget_s=10.0)
        self.assertEqual(rep.results["k"], lc.VIOLATION, rep.summary())
        self.assertLess(rep.seconds, 10.0)
        self.assertEqual(sorted(op.kind for op in rep.violations["k"]), ["get", "put", "put"])

    def test_unresolved_maybe_writes_stay_checkable(self):
        # 12 overlapping unknown-outcome writes, none observed: accepted quickly
        history = [put("k", "v%d" % i, None, i * 0.01, None, client=i) for i in range(12)]
        history += [put("k", "z", 90, 50, 51), get("k", True, "z", 90, 52, 53)]
        rep = lc.check(history, time_budget_s=10.0)
        self.assertTrue(rep.ok, rep.summary())

    def test_concurrent_ops_get_budget_unknown_not_ok(self):
        # a tiny step budget must give "unknown", never "ok"
        history = [put("k", "v%d" % i, None, i * 0.01, None, client=i) for i in range(12)]
        history += [get("k", True, "v3", 50, 100, 101)]
        self.assertEqual(lc.check_key(history, step_budget=5), lc.UNKNOWN)


if __name__ == "__main__":
    unittest.main()
