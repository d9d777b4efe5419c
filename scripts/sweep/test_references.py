"""Tests of the two-reference comparison (references.py) and of where each reference's results
are cached (cache.result_path), on rows made here: which verdicts count as different, what each
column counts, and that the TorchScript results keep their old place (cached sweeps stay
valid) while the .pt2 ones get their own."""

import os
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sweep import cache, references  # noqa: E402


def pair(model, exit_code, category=None, flags=()):
    result = None if exit_code is None else {"exit": exit_code, "first_divergence": None}
    return {"model": model, "pair": "legacy", "result": result, "category": category,
            "flags": list(flags)}


def fault(model, exit_code, module_right=True, op_right=True, below=False):
    outcome = {"below_tolerance": below, "exit": exit_code, "detected": exit_code == 1}
    if exit_code == 1:
        outcome.update(module_right=module_right, op_right=op_right)
    return {"model": model, "pair": "legacy", "recipe": {"id": "f0", "detail": "scale"},
            "result": {"exit": exit_code}, "outcome": outcome}


class Compare(unittest.TestCase):
    def setUp(self):
        self.specs = [{"id": "a", "arch": "A"}, {"id": "b", "arch": "B"}]
        records = {"a": {"status": "ok"}, "b": {"status": "error", "stage": "torch.export",
                                                "error": "Unsupported: data-dependent 7"}}
        patcher = mock.patch.object(references.cache, "read_json",
                                    side_effect=lambda path, default=None:
                                    records.get(os.path.basename(os.path.dirname(path))))
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_exported_counts_architectures_and_keeps_the_reason(self):
        took, refused, took_archs, archs = references.exported(self.specs)
        self.assertEqual((took, took_archs, archs), (["a"], 1, 2))
        self.assertIn("data-dependent", refused["b"])

    def test_same_verdicts_are_not_listed(self):
        ts = {"pairs": [pair("a", 0), pair("b", 0)], "faults": [fault("a", 1)]}
        p2 = {"pairs": [pair("a", 0)], "faults": [fault("a", 1)]}
        out = references.compare(self.specs, ts, p2)
        self.assertEqual(out["differences"], [])
        self.assertEqual(out["columns"]["TorchScript, every model"]["clean pairs checked"], 2)
        self.assertEqual(out["columns"]["TorchScript, models with a .pt2"]
                         ["clean pairs checked"], 1)
        self.assertEqual(out["columns"][".pt2"]["culprit module"], "1 of 1 (100.0%)")

    def test_a_clean_pair_differs_by_exit_or_category(self):
        ts = {"pairs": [pair("a", 0)], "faults": []}
        p2 = {"pairs": [pair("a", 1, "false alarm")], "faults": []}
        out = references.compare(self.specs, ts, p2)
        self.assertEqual([d["key"] for d in out["differences"]], ["a/legacy"])
        self.assertEqual(out["columns"][".pt2"]["false alarms"], 1)

    def test_a_fault_differs_by_its_culprit_not_only_its_exit(self):
        ts = {"pairs": [], "faults": [fault("a", 1)]}
        p2 = {"pairs": [], "faults": [fault("a", 1, module_right=False)]}
        out = references.compare(self.specs, ts, p2)
        self.assertEqual([d["key"] for d in out["differences"]], ["a/legacy/f0"])
        self.assertEqual(out["columns"][".pt2"]["culprit module"], "0 of 1 (0.0%)")

    def test_an_unchecked_pair_is_no_difference(self):
        ts = {"pairs": [pair("a", 0)], "faults": []}
        p2 = {"pairs": [pair("a", None)], "faults": []}
        self.assertEqual(references.compare(self.specs, ts, p2)["differences"], [])

    def test_render_writes_a_row_per_measure_and_the_differences(self):
        ts = {"pairs": [pair("a", 0)], "faults": [fault("a", 1)]}
        p2 = {"pairs": [pair("a", 2, "refusal")], "faults": [fault("a", 1)]}
        text = "\n".join(references.render(references.compare(self.specs, ts, p2)))
        self.assertIn("Architectures torch.export exports: 1 of 2", text)
        self.assertIn("| culprit op |", text)
        self.assertIn("| a/legacy | clean | exit 0 | exit 2", text)


class ResultPaths(unittest.TestCase):
    def test_torchscript_keeps_its_place_and_pt2_has_its_own(self):
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.dict(os.environ, {"ALIGN_CHECK_CACHE": tmp}):
            ts = cache.result_path("bin", "timm/resnet18/legacy")
            self.assertEqual(ts, os.path.join(tmp, "sweep", "results", "bin",
                                              "timm__resnet18__legacy.json"))
            self.assertEqual(cache.result_path("bin", "timm/resnet18/legacy", "torchscript"),
                             ts)
            self.assertNotEqual(cache.result_path("bin", "timm/resnet18/legacy", "pt2"), ts)


class Splice(unittest.TestCase):
    def test_a_second_splice_replaces_the_first(self):
        ref = references.compare([], {"pairs": [], "faults": []}, {"pairs": [], "faults": []})
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "sweep.md")
            with open(path, "w") as f:
                f.write("# Sweep\n\n## Baseline table\n\nrows\n")
            references.splice(path, ref, "first")
            references.splice(path, ref, "second")
            with open(path) as f:
                text = f.read()
        self.assertEqual(text.count(references.BEGIN), 1)
        self.assertIn("second", text)
        self.assertNotIn("first", text)
        self.assertLess(text.index(references.BEGIN), text.index("## Baseline table"))


if __name__ == "__main__":
    unittest.main()
