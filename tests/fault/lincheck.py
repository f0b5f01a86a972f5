# lincheck.py - linearizability checker for slotd's per-key versioned register (Wing & Gong / Lowe).
"""Checks a recorded history of put/get/cas/delete operations against a per-key register model.

History format: a list of ``Op`` (or dicts with the same fields, see ``op_from_dict``):

    kind      "put" | "get" | "cas" | "delete"
    key       any hashable (bytes or str)
    input     put: {"value"}; cas: {"expected", "value"}; get/delete: {}
    output    None when the outcome is unknown (the op "maybe happened"), else
              put:    {"version", "prev_version"?}
              get:    {"found", "value", "version"}
              cas:    {"ok", "version", "index"?}      version = key's version after the command
              delete: {"deleted", "index"?, "prev_version"?}
    invoke    time the call was issued (any monotonic clock)
    complete  time the answer arrived, or None (unknown outcome)

An op with an unknown outcome may take effect at any point after its invoke, or never; its output
is unconstrained. Definite failures must not be recorded (they did not happen).

Model state per key: (present, value, version, version_floor, index_floor). version is None when
a maybe-write happened whose index nobody reported (then version > version_floor); index_floor is
the highest Raft index of a write linearized so far: every later write must report a larger one
(slotd: a write's version/applied index is the Raft index of its entry, so per key they increase
in linearization order).

Search: per key, depth-first over the next linearization point with a memo of (bitset of
linearized ops, state), as porcupine does. Budgeted per key by steps and seconds; running out
gives "unknown", never "ok".

Public API:
    check(history, step_budget=..., time_budget_s=...) -> Report
    check_key(ops, ...) -> "ok" | "violation" | "unknown"
    shrink(ops, ...) -> list of ops (a small sub-history that still fails)
    write_violation(report, path) -> path of the JSON written
"""

import json
import time
from collections import defaultdict

OK = "ok"
VIOLATION = "violation"
UNKNOWN = "unknown"

STEP_BUDGET = 2_000_000
TIME_BUDGET_S = 20.0
SHRINK_CHECKS_MAX = 400
SHRINK_TIME_S = 20.0

INITIAL_STATE = (False, None, 0, 0, 0)


class Op:
    __slots__ = ("id", "client", "kind", "key", "input", "output", "invoke", "complete", "note")

    def __init__(self, kind, key, input=None, output=None, invoke=0.0, complete=None, client=0,
                 id=None, note=""):
        assert kind in ("put", "get", "cas", "delete"), kind
        self.id = id
        self.client = client
        self.kind = kind
        self.key = key
        self.input = dict(input or {})
        self.output = dict(output) if output is not None else None
        self.invoke = float(invoke)
        self.complete = None if complete is None else float(complete)
        self.note = note
        if self.output is None:
            assert self.complete is None, "an op with a complete time needs an output"
        else:
            assert self.complete is not None and self.complete >= self.invoke, \
                "an op with an output needs complete >= invoke"

    @property
    def maybe(self):
        return self.output is None

    def to_dict(self):
        return {"id": self.id, "client": self.client, "kind": self.kind, "key": _show(self.key),
                "input": {k: _show(v) for k, v in self.input.items()},
                "output": None if self.output is None
                else {k: _show(v) for k, v in self.output.items()},
                "invoke": round(self.invoke, 6),
                "complete": None if self.complete is None else round(self.complete, 6),
                "note": self.note}

    def __repr__(self):
        return "Op(%s)" % json.dumps(self.to_dict(), sort_keys=True)


def _show(value):
    if isinstance(value, bytes):
        try:
            return value.decode("ascii")
        except UnicodeDecodeError:
            return "0x" + value.hex()
    return value


def op_from_dict(d):
    return Op(d["kind"], d["key"], d.get("input"), d.get("output"), d.get("invoke", 0.0),
              d.get("complete"), d.get("client", 0), d.get("id"), d.get("note", ""))


# ---- the model --------------------------------------------------------------------------------

def step(state, op):
    """The possible states after op takes effect in state (empty list: op cannot happen here)."""
    present, value, version, vfloor, ifloor = state
    out = op.output
    kind = op.kind
    # The current version: an int, or None (unknown, > vfloor). 0 when absent.
    if kind == "get":
        if out is None:
            return [state]
        if not present:
            return [state] if not out["found"] else []
        if not out["found"] or out["value"] != value:
            return []
        if version is not None:
            return [state] if out["version"] == version else []
        if out["version"] <= vfloor:
            return []
        return [(True, value, out["version"], 0, max(ifloor, out["version"]))]

    if kind == "put":
        if out is None:
            return [(True, op.input["value"], None, _vlo(state), ifloor)]
        new = out["version"]
        if new <= ifloor or (version is not None and new <= version) or \
                (version is None and new <= vfloor):
            return []
        prev = out.get("prev_version")
        if prev is not None and not _prev_ok(state, prev):
            return []
        return [(True, op.input["value"], new, 0, new)]

    if kind == "delete":
        if out is None:
            return [(False, None, 0, 0, ifloor)]
        if out["deleted"] != present:
            return []
        prev = out.get("prev_version")
        if prev is not None and not _prev_ok(state, prev):
            return []
        index = out.get("index")
        if index is not None:
            if index <= ifloor or (present and version is not None and index <= version) or \
                    (present and version is None and index <= vfloor):
                return []
            ifloor = index
        return [(False, None, 0, 0, ifloor)]

    # cas
    expected = op.input["expected"]
    new_value = op.input["value"]
    if not present:
        matches = expected == 0          # True/False
    elif expected == 0:
        matches = False
    elif version is not None:
        matches = version == expected
    else:
        matches = None if expected > vfloor else False   # unknown version: maybe equal
    if out is None:
        succeeded = (True, new_value, None, max(_vlo(state), expected), ifloor)
        if matches is True:
            return [succeeded]
        if matches is False:
            return [state]
        return [succeeded, state]
    index = out.get("index")
    if out["ok"]:
        if matches is False:
            return []
        new = out["version"]
        if new <= ifloor or new <= expected or (index is not None and index != new):
            return []
        return [(True, new_value, new, 0, new)]
    # failed: version reports the key's current version (0 if absent)
    if matches is True:
        return []
    if index is not None and (index <= ifloor or (present and version is not None
                                                  and index <= version)):
        return []
    ifloor = max(ifloor, index or 0)
    if not present:
        return [(False, None, 0, 0, ifloor)] if out["version"] == 0 else []
    if version is not None:
        return [(present, value, version, 0, ifloor)] if out["version"] == version else []
    cur = out["version"]
    if cur <= vfloor or cur == expected:
        return []
    return [(True, value, cur, 0, max(ifloor, cur))]


def _vlo(state):
    """Exclusive lower bound for the index of a write applied in state."""
    present, _, version, vfloor, ifloor = state
    return max(ifloor, vfloor, version or 0)


def _prev_ok(state, prev):
    present, _, version, vfloor, _ = state
    if not present:
        return prev == 0
    if version is not None:
        return prev == version
    return prev > vfloor


# ---- the search -------------------------------------------------------------------------------

class _Entry:
    __slots__ = ("op_index", "is_call", "time", "match", "prev", "next")

    def __init__(self, op_index, is_call, t):
        self.op_index = op_index
        self.is_call = is_call
        self.time = t
        self.match = None
        self.prev = None
        self.next = None


def _build_list(ops):
    """Doubly linked list of call/return entries sorted by time (calls first on ties, so ops that
    touch at one instant count as concurrent). Maybe ops return at +infinity."""
    entries = []
    for i, op in enumerate(ops):
        call = _Entry(i, True, op.invoke)
        ret = _Entry(i, False, op.complete if op.complete is not None else float("inf"))
        call.match = ret
        entries.append(call)
        entries.append(ret)
    entries.sort(key=lambda e: (e.time, 0 if e.is_call else 1, e.op_index))
    head = _Entry(-1, False, float("-inf"))  # sentinel
    prev = head
    for e in entries:
        prev.next = e
        e.prev = prev
        prev = e
    return head


def _lift(entry):
    entry.prev.next = entry.next
    if entry.next is not None:
        entry.next.prev = entry.prev
    m = entry.match
    m.prev.next = m.next
    if m.next is not None:
        m.next.prev = m.prev


def _unlift(entry):
    m = entry.match
    m.prev.next = m
    if m.next is not None:
        m.next.prev = m
    entry.prev.next = entry
    if entry.next is not None:
        entry.next.prev = entry


def check_key(ops, step_budget=STEP_BUDGET, time_budget_s=TIME_BUDGET_S,
              initial=INITIAL_STATE):
    """"ok", "violation" or "unknown" (budget exhausted) for the ops of one key."""
    ops = list(ops)
    required = sum(1 for op in ops if not op.maybe)
    if required == 0:
        return OK
    head = _build_list(ops)
    state = initial
    linearized = 0          # bitset of op indexes
    done_required = 0
    cache = set()
    stack = []              # (entry, state before, successor list, successor index)
    entry = head.next
    steps = 0
    deadline = time.monotonic() + time_budget_s
    while True:
        steps += 1
        if steps > step_budget or (steps & 0x3ff == 0 and time.monotonic() > deadline):
            return UNKNOWN
        if entry is None:
            # only possible when every remaining op is a maybe op (their returns are at +inf and
            # the last entry is one); reaching the end is success
            return OK
        if entry.is_call:
            op = ops[entry.op_index]
            successors = step(state, op)
            advanced = False
            for si in range(len(successors)):
                new_state = successors[si]
                bits = linearized | (1 << entry.op_index)
                if (bits, new_state) in cache:
                    continue
                cache.add((bits, new_state))
                # a read that fits without changing the state is committed: a get only ever
                # keeps or refines the state, so any linearization of the rest can place it
                # here (Lowe's read optimisation) and backtracking skips past it
                forced = op.kind == "get" and new_state == state
                stack.append((entry, state, successors, si, forced))
                _lift(entry)
                linearized = bits
                state = new_state
                if not op.maybe:
                    done_required += 1
                    if done_required == required:
                        return OK
                entry = head.next
                advanced = True
                break
            if not advanced:
                entry = entry.next
            continue
        # a return entry whose op is not linearized yet: backtrack
        if ops[entry.op_index].maybe:
            # every remaining required op returned earlier in the list; maybe ops can all move
            # to the end, so reaching a maybe return means only maybe ops are left
            if done_required == required:
                return OK
        while True:
            if not stack:
                return VIOLATION
            top, prev_state, successors, si, forced = stack.pop()
            _unlift(top)
            linearized &= ~(1 << top.op_index)
            if not ops[top.op_index].maybe:
                done_required -= 1
            state = prev_state
            if forced:
                continue
            # try the op's remaining successor states before moving past it
            tried = False
            for sj in range(si + 1, len(successors)):
                new_state = successors[sj]
                bits = linearized | (1 << top.op_index)
                if (bits, new_state) in cache:
                    continue
                cache.add((bits, new_state))
                stack.append((top, state, successors, sj, False))
                _lift(top)
                linearized = bits
                state = new_state
                if not ops[top.op_index].maybe:
                    done_required += 1
                    if done_required == required:
                        return OK
                entry = head.next
                tried = True
                break
            if tried:
                break
            entry = top.next
            break


# ---- shrinking --------------------------------------------------------------------------------

def _references(op):
    """What op observes: values, versions, absence and presence (for safe shrinking)."""
    values, versions, absence, presence = set(), set(), False, False
    out = op.output
    if op.kind == "cas":
        if op.input["expected"]:
            versions.add(op.input["expected"])
        else:
            absence = True
        if out is not None and not out["ok"]:
            if out["version"]:
                versions.add(out["version"])
            else:
                absence = True
    if out is None:
        return values, versions, absence, presence
    if op.kind == "get":
        if out["found"]:
            values.add(out["value"])
            versions.add(out["version"])
        else:
            absence = True
    elif op.kind in ("put", "delete"):
        prev = out.get("prev_version")
        if prev:
            versions.add(prev)
        elif prev == 0:
            absence = True
        if op.kind == "delete":
            if out["deleted"]:
                presence = True
            else:
                absence = True
    return values, versions, absence, presence


def _removable(op, others):
    """True when no remaining op observes op's effect, so dropping it cannot make the rest fail
    for a reason that was not in the original history."""
    if op.kind == "get":
        return True
    values, versions, absence, presence = set(), set(), False, False
    for other in others:
        v, ver, a, p = _references(other)
        values |= v
        versions |= ver
        absence |= a
        presence |= p
    if op.kind == "delete":
        return not absence
    if op.kind == "cas" and op.output is not None and not op.output["ok"]:
        return True
    if op.input.get("value") in values or presence:
        return False
    if op.output is not None and op.output.get("version") in versions:
        return False
    return True


def shrink(ops, step_budget=200_000, time_budget_s=2.0, checks_max=SHRINK_CHECKS_MAX,
           total_time_s=SHRINK_TIME_S):
    """A sub-history of ops (one key) that still reports a violation: removes chunks of ops
    (halves, quarters, ... down to single ops, latest first, as delta debugging does) while the
    rest still fails, until nothing more can go or the bounds are reached."""
    current = sorted(ops, key=lambda o: o.invoke)
    checks = 0
    deadline = time.monotonic() + total_time_s

    def budget_left():
        return checks < checks_max and time.monotonic() < deadline

    chunk = max(1, len(current) // 2)
    while budget_left():
        removed_any = False
        end = len(current)
        while end > 0 and budget_left():
            start = max(0, end - chunk)
            candidate = current[:start] + current[end:]
            if all(_removable(op, candidate) for op in current[start:end]):
                checks += 1
                if check_key(candidate, step_budget, time_budget_s) == VIOLATION:
                    current = candidate
                    removed_any = True
            end = start
        if chunk == 1 and not removed_any:
            break
        chunk = max(1, chunk // 2) if not removed_any or chunk > 1 else 1
    return current


# ---- whole histories --------------------------------------------------------------------------

class Report:
    def __init__(self):
        self.results = {}       # key -> "ok" | "violation" | "unknown"
        self.ops = 0
        self.maybe_ops = 0
        self.violations = {}    # key -> minimal failing ops
        self.seconds = 0.0

    @property
    def ok(self):
        return all(r == OK for r in self.results.values())

    def unknown_keys(self):
        return [k for k, r in self.results.items() if r == UNKNOWN]

    def summary(self):
        counts = defaultdict(int)
        for r in self.results.values():
            counts[r] += 1
        return ("%d ops (%d maybe) over %d keys in %.2f s: %d ok, %d violation, %d unknown"
                % (self.ops, self.maybe_ops, len(self.results), self.seconds, counts[OK],
                   counts[VIOLATION], counts[UNKNOWN]))

    def to_dict(self):
        return {"summary": self.summary(),
                "results": {str(_show(k)): r for k, r in self.results.items()},
                "violations": {str(_show(k)): [op.to_dict() for op in ops]
                               for k, ops in self.violations.items()}}


def check(history, step_budget=STEP_BUDGET, time_budget_s=TIME_BUDGET_S, do_shrink=True):
    """Checks every key's sub-history; shrinks each violation. Returns a Report."""
    t0 = time.monotonic()
    report = Report()
    by_key = defaultdict(list)
    for i, op in enumerate(history):
        if isinstance(op, dict):
            op = op_from_dict(op)
        if op.id is None:
            op.id = i
        by_key[op.key].append(op)
        report.ops += 1
        report.maybe_ops += op.maybe
    for key in sorted(by_key, key=lambda k: str(k)):
        result = check_key(by_key[key], step_budget, time_budget_s)
        report.results[key] = result
        if result == VIOLATION:
            report.violations[key] = shrink(by_key[key]) if do_shrink else by_key[key]
    report.seconds = time.monotonic() - t0
    return report


def write_violation(report, path, echo=True):
    """Writes the report (with each violation's minimal sub-history) as JSON; prints the
    violations when echo. Returns path."""
    text = json.dumps(report.to_dict(), indent=1, sort_keys=True)
    with open(path, "w") as f:
        f.write(text + "\n")
    if echo and report.violations:
        import sys
        sys.stderr.write("\nlincheck: %s\nminimal failing sub-histories (%s):\n"
                         % (report.summary(), path))
        for key, ops in report.violations.items():
            sys.stderr.write("  key %s:\n" % _show(key))
            for op in sorted(ops, key=lambda o: o.invoke):
                sys.stderr.write("    %s\n" % json.dumps(op.to_dict(), sort_keys=True))
    return path


def save_history(history, path):
    with open(path, "w") as f:
        json.dump([op.to_dict() if isinstance(op, Op) else op for op in history], f)
        f.write("\n")


def load_history(path):
    """A history saved by save_history (keys/values as str)."""
    with open(path) as f:
        return [op_from_dict(d) for d in json.load(f)]


if __name__ == "__main__":
    import argparse
    import sys
    ap = argparse.ArgumentParser(description="check a saved slotd history for linearizability")
    ap.add_argument("history")
    ap.add_argument("--out", default="lincheck-violation.json")
    args = ap.parse_args()
    rep = check(load_history(args.history))
    print(rep.summary())
    if rep.violations:
        write_violation(rep, args.out)
    sys.exit(0 if rep.ok else 1)
