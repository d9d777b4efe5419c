"""The hazards family's table (hazards.py) against its models (hazard_models.py): every spec
names a model class that exists, its inputs are made under the names the forward takes, and
the model runs on them at batch 1 (the check) and at the calibration batch. Run by
scripts/test.sh (`unittest discover -s scripts/sweep`)."""

import inspect
import os
import sys
import unittest

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from sweep import calibration, hazards, registries  # noqa: E402


class HazardsTable(unittest.TestCase):
    def test_ids_unique_and_registered(self):
        specs = registries.FAMILIES["hazards"]()
        ids = [s["id"] for s in specs]
        self.assertEqual(len(ids), len(set(ids)))
        self.assertGreaterEqual(len({s["arch"] for s in specs}), 30)
        for s in specs:
            self.assertEqual(s["inputs"]["kind"], "hazard")
            self.assertIn(s["build"]["hazard"], ("inplace", "control", "subtol", "fastpath",
                                                 "fp16"))

    def test_models_run_on_their_inputs(self):
        import torch
        from sweep import hazard_models
        for s in hazards.specs(registries.spec):
            with self.subTest(model=s["id"]):
                model = hazard_models.build(s["build"])
                inputs = hazard_models.make_inputs(s["inputs"], 1, 100)
                forward = getattr(model, "forward")
                params = list(inspect.signature(forward).parameters)
                self.assertEqual(params[:len(inputs)], list(inputs))
                with torch.no_grad():
                    model(*inputs.values())
                    batch = hazard_models.make_inputs(s["inputs"],
                                                      calibration.CALIBRATION_BATCH_SIZE, 1)
                    model(*batch.values())


if __name__ == "__main__":
    unittest.main()
