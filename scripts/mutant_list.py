"""The hand-written mutants of the safety-critical modules, each with the tests that must kill
it (``scripts/mutants.py`` applies them one at a time in a copy of the tree).

A mutant is a plausible one-line bug: the exact text it replaces (found once in its file)
and what replaces it. Each names the rule it breaks. A new safety rule comes with a mutant
here; a mutant no test kills is either killed by a new test or explained in
docs/testing.md (Mutation check).
"""

from __future__ import annotations

from dataclasses import dataclass

RBAC = "emulator/src/kubemu/apiserver/rbac.py"
MANAGED = "emulator/src/kubemu/storage/managed.py"
JOURNAL = "src/testbed/backends/kubernetes/stack_journal.py"
STACK = "src/testbed/backends/kubernetes/stack.py"
RUNNER = "src/testbed/execution/steps/runner.py"
PROCESSES = "src/testbed/core/processes.py"
RESPONSE = "src/testbed/clients/response.py"
SAMPLED = "src/testbed/probes/scale/sampled.py"
VERDICT = "src/testbed/results/verdict.py"
EXPORT_RBAC = "src/testbed/backends/kubernetes/rbac.py"

RBAC_TESTS = ("emulator/tests/test_rbac_rules.py",)
SSA_TESTS = ("emulator/tests/test_ssa_ownership.py",)
STACK_TESTS = ("tests/backends/kubernetes/test_stack_journal.py",)
STEP_TESTS = ("tests/execution/test_steps_process.py",)
CUT_TESTS = ("tests/clients/test_cut_short.py",)
SAMPLER_TESTS = ("tests/probes/scale/test_scale_analysis.py",)
EXPORT_TESTS = ("tests/execution/test_export_roles.py",)
VERDICT_TESTS = (
    "tests/results/test_verdict.py::test_worst",
    "tests/cli/test_exit_codes.py",
    "tests/cli/test_nothing_tested.py",
)


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # relative to the repository
    old: str  # found exactly once in the file
    new: str
    tests: tuple[str, ...]  # pytest paths or node ids that must fail
    breaks: str  # the rule it breaks, in a few words


MUTANTS: tuple[Mutant, ...] = (
    # -- RBAC in the emulator -------------------------------------------------------------
    Mutant("rbac-api-groups", RBAC,
           'if "*" not in groups and attrs.group not in groups:', "if False:",
           RBAC_TESTS, "a rule for pods in one API group grants pods in every group"),
    Mutant("rbac-verb-wildcard", RBAC,
           'if "*" not in verbs and attrs.verb not in verbs:', "if attrs.verb not in verbs:",
           RBAC_TESTS, "verbs: ['*'] grants nothing"),
    Mutant("rbac-names-without-name", RBAC,
           "return not names or attrs.name in names",
           "return not names or not attrs.name or attrs.name in names",
           RBAC_TESTS, "a rule with resourceNames grants list and create"),
    Mutant("rbac-parent-covers-subresource", RBAC,
           'return any(r in ("*", wanted, f"*/{attrs.subresource}") for r in resources)',
           'return any(r in ("*", wanted, attrs.resource) for r in resources)',
           RBAC_TESTS, "pods grants pods/exec"),
    Mutant("rbac-rolebindings-everywhere", RBAC,
           'bindings, _ = self.store.list(f"rolebindings.{RBAC}", namespace)',
           'bindings, _ = self.store.list(f"rolebindings.{RBAC}", None)',
           RBAC_TESTS, "a RoleBinding grants in every namespace"),
    Mutant("rbac-group-names-a-user", RBAC,
           'if kind == "Group" and name in user.groups:',
           'if kind == "Group" and name in (user.name, *user.groups):',
           RBAC_TESTS, "a Group subject matches a user of that name"),
    Mutant("rbac-url-prefix", RBAC,
           'url == attrs.path or (url.endswith("*") and attrs.path.startswith(url[:-1]))',
           'attrs.path.startswith(url.rstrip("*"))',
           RBAC_TESTS, "nonResourceURLs /metrics grants /metrics/anything"),
    # -- server-side apply ----------------------------------------------------------------
    Mutant("ssa-co-owner-removed", MANAGED,
           "for path in _removals(previous[1] - wanted - others):",
           "for path in _removals(previous[1] - wanted):",
           SSA_TESTS, "a field another manager owns goes when one owner stops applying it"),
    Mutant("ssa-same-value-conflicts", MANAGED,
           'if path[-1] != "." and value_at(live, path) != value_at(applied, path):',
           'if path[-1] != ".":',
           SSA_TESTS, "applying the value another manager set is a conflict"),
    Mutant("ssa-force-keeps-owners", MANAGED,
           "owners[other] = (entry, owned - {p for _, p in found})",
           "owners[other] = (entry, owned)",
           SSA_TESTS, "force leaves the field owned by its former managers too"),
    Mutant("ssa-keyed-item-by-fields", MANAGED,
           'return sorted(gone, key=lambda p: (-len(p), p[-1] != "."))',
           'return sorted(gone, key=lambda p: (-len(p), p[-1] == "."))',
           SSA_TESTS, "a dropped container leaves an empty {} in the list"),
    # -- stack journal, removal, ownership -----------------------------------------------
    Mutant("stack-remove-unlabelled", JOURNAL,
           "if current is None or any(labels.get(k) != v for k, v in mine.items()):",
           "if current is None:",
           STACK_TESTS, "removal deletes a CRD from before the run and others' objects"),
    Mutant("stack-remove-other-run", JOURNAL,
           "mine = {RUN: label_value(run_id), WORKER: label_value(worker_id)}",
           "mine = {WORKER: label_value(worker_id)}",
           STACK_TESTS, "removal deletes another run's object of the same worker id"),
    Mutant("stack-remove-oldest-first", JOURNAL,
           "for ref in reversed(list(dict.fromkeys(json.dumps(r, sort_keys=True) for r in refs))):",
           "for ref in list(dict.fromkeys(json.dumps(r, sort_keys=True) for r in refs)):",
           STACK_TESTS, "a CRD is deleted before the custom objects it defines"),
    Mutant("stack-replace-other-run", STACK,
           "if current is None or any(labels.get(k) != v for k, v in mine.items()):",
           "if current is None or labels.get(WORKER) != label_value(self.worker_id):",
           STACK_TESTS, "another run's same-named object is replaced (then deleted)"),
    Mutant("stack-refuse-preinstalled-crd", STACK,
           "if current is not None and item.kind == CRD and labels.get(RUN) is None:",
           "if current is not None and item.kind == CRD and labels.get(RUN) is not None:",
           STACK_TESTS, "a CRD installed before the run is refused instead of used"),
    # -- steps' process control ------------------------------------------------------------
    Mutant("steps-timeout-stops-the-shell", RUNNER,
           "        except TimeoutError:\n            await stop(child, STOP_GRACE_S)\n",
           "        except TimeoutError:\n            child.process.kill()\n"
           "            await child.process.wait()\n",
           STEP_TESTS, "a timeout kills the shell, its children run on"),
    Mutant("steps-finished-no-sweep", RUNNER,
           "        await stop(child, STOP_GRACE_S)  # what it left running in its group goes too",
           "        child.pid_file.unlink(missing_ok=True)",
           STEP_TESTS, "what a finished step left running runs on"),
    Mutant("steps-cancel-no-stop", RUNNER,
           "            await asyncio.shield(stop(child, STOP_GRACE_S))\n            raise",
           "            raise",
           STEP_TESTS, "Ctrl-C leaves a running step's group behind"),
    Mutant("steps-cancelled-start-no-stop", RUNNER,
           "            await asyncio.shield(_stop_when_started(started))\n            raise",
           "            raise",
           STEP_TESTS, "Ctrl-C during a step's start leaves its child running"),
    Mutant("steps-same-session", RUNNER,
           "            start_new_session=True,\n            preexec_fn=_die_with_parent,",
           "            start_new_session=False,\n            preexec_fn=_die_with_parent,",
           STEP_TESTS, "a step's child shares testbed's process group"),
    Mutant("stop-signals-the-leader-only", PROCESSES,
           "        signal_group(process.pid, sig)\n",
           "        if process.returncode is None:\n            process.send_signal(sig)\n",
           STEP_TESTS, "stopping a child signals its leader, not its group"),
    Mutant("leftover-ignores-start-time", PROCESSES,
           "    if group_alive(pid) and (started is None or start_time(pid) in (started, None)):\n"
           "        signal_group(pid, signal.SIGKILL)",
           "    if group_alive(pid):\n        signal_group(pid, signal.SIGKILL)",
           STEP_TESTS, "a reused pid's process group is killed as a leftover"),
    # -- cut streams -----------------------------------------------------------------------
    Mutant("cut-stream-without-terminator", RESPONSE,
           "if stream and (cut or not response.ended):", "if stream and cut:",
           CUT_TESTS, "a stream without its terminator passes"),
    Mutant("cut-answer-without-finish", RESPONSE,
           "if ending.finish_reason and response.finish_reason is None:", "if False:",
           CUT_TESTS, "an answer without a finish reason passes"),
    # -- the sampler's stamps ---------------------------------------------------------------
    Mutant("stamp-keeps-the-latest", SAMPLED,
           "if old is None or millis < old:", "if old is None or millis > old:",
           SAMPLER_TESTS, "merged samplers keep the later time of a stage"),
    Mutant("stamp-relist-as-watch", SAMPLED,
           "        if live:\n            for stage in reached - (before or set()):",
           "        if True:\n            for stage in reached - (before or set()):",
           SAMPLER_TESTS, "a relist's receive time counts as when the change happened"),
    # -- the sampler's end ------------------------------------------------------------------
    Mutant("sampler-inherits-ignored-sigint", "src/testbed/cli/scale.py",
           "        signal.signal(signal.SIGINT, signal.default_int_handler)", "        pass",
           ("tests/probes/scale/test_scale_follow.py",),
           "a follower started with SIGINT ignored runs on after Ctrl-C"),
    # -- RBAC in the export ---------------------------------------------------------------------
    Mutant("export-extra-verb", EXPORT_RBAC,
           '("", "pods"): {"list", "watch", "delete"},',
           '("", "pods"): {"list", "watch", "delete", "deletecollection"},',
           EXPORT_TESTS, "the runner's Role grants a verb no worker uses"),
    Mutant("export-secrets-listed", EXPORT_RBAC,
           '{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},',
           '{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "list"]},',
           EXPORT_TESTS, "the runner may LIST Secrets (every Secret's value)"),
    Mutant("export-secrets-by-any-name", EXPORT_RBAC,
           '         "resourceNames": names},', '         "resourceNames": []},',
           EXPORT_TESTS, "the runner reads any Secret, not only its own by name"),
    Mutant("export-datashim-any-namespace", EXPORT_RBAC,
           'rules[index]["resourceNames"] = [str(backend.namespace)]', "pass",
           EXPORT_TESTS, "the runner may patch every namespace, not only its own"),
    # -- the verdict policy -------------------------------------------------------------------
    Mutant("verdict-error-over-fail", VERDICT,
           "    Status.FAIL,\n    Status.ERROR,\n", "    Status.ERROR,\n    Status.FAIL,\n",
           VERDICT_TESTS, "a product failure is hidden behind an infrastructure error"),
    Mutant("verdict-nothing-tested-is-green", VERDICT,
           "        return EXIT_NOTHING_TESTED", "        return EXIT_OK",
           VERDICT_TESTS, "a command that tested nothing exits 0"),
    Mutant("verdict-partly-skipped-ignored", VERDICT,
           "if status in fail_on or (partly_skipped and Status.SKIPPED in fail_on):",
           "if status in fail_on:",
           VERDICT_TESTS, "--fail-on skipped lets a partly skipped PASS exit 0"),
    Mutant("verdict-empty-is-pass", VERDICT,
           "        return Status.SKIPPED\n    return min(",
           "        return Status.PASS\n    return min(",
           VERDICT_TESTS, "no statuses at all combine to PASS"),
)  # fmt: skip
