"""Every fixture generator of the repository, in the order they must run, and how to tell
whether its fixtures are there.

Responsible for the one list that scripts/regenerate_fixtures.py (and through it
scripts/test.sh) runs and that the README's fixture table repeats: which script writes what,
the file whose absence means "regenerate", whether git keeps the output, and roughly how long
a run takes on 2 cores. Order matters where one family reads another (optimized/ copies lib/;
the zoo's hostile_names_legacy derives from conv_bn_legacy, inside the same script).
"""

from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class Generator:
    script: str                 # under scripts/
    writes: str                 # what it writes, as the README says it
    marker: str                 # relative to the repository root: missing means regenerate
    args: Tuple[str, ...] = ()
    committed: bool = True      # False: ignored by git, made on demand (large)
    seconds: int = 10           # measured, one run on 2 cores
    size: str = ""              # measured, on disk
    quiet: bool = False         # its stdout is the exporters' chatter, not a results table


GENERATORS = (
    Generator("make_fixtures.py", "tests/fixtures/*_legacy, *_dynamo, fault_* and "
              "manifest.json: the zoo of small networks and planted faults",
              "tests/fixtures/manifest.json", size="1 MB", seconds=20),
    Generator("make_pt2_fixtures.py", "tests/fixtures/pt2/: torch.export archives (.pt2) of "
              "zoo networks, clean and with a planted fault in the ONNX, an encoder block, a torch.cond program, the custom-op network "
              "(my_ops::my_add, --torch-ops) and a ranged dynamic batch with its own ONNX "
              "(needs the zoo and scripts/build_custom_ops.sh's library)",
              "tests/fixtures/pt2/manifest.json", size="1.4 MB", seconds=20),
    # Not committed: a matmul's last bits depend on the CPU (AVX2 and AVX-512 kernels), and
    # the tests hold align-check to these values bit for bit.
    Generator("make_pt2_values.py", "tests/fixtures/pt2/*/values.npz: what ep.module() "
              "computes from each committed archive on this machine (needs pt2/)",
              "tests/fixtures/pt2/values.json", committed=False, size="0.3 MB", seconds=8),
    Generator("make_library_fixtures.py", "tests/fixtures/lib/: transformers, timm and "
              "Ultralytics models, their library exports and planted faults",
              "tests/fixtures/lib/manifest.json", size="15 MB", seconds=100),
    Generator("make_value_fixtures.py", "tests/fixtures/vk_*/ and value_kinds.json: "
              "dtypes, zero-size and 0-d values, nested outputs, unused arguments",
              "tests/fixtures/value_kinds.json", size="0.6 MB", seconds=25),
    Generator("make_first_contact_fixtures.py", "tests/fixtures/first_contact/: the files "
              "users pass by mistake (checkpoints, .pt2, training mode, GPU traces)",
              "tests/fixtures/first_contact/model.onnx", size="0.2 MB", seconds=8),
    Generator("make_precision_fixtures.py", "tests/fixtures/precision/: float16 and "
              "bfloat16 pairs, a float16 overflow",
              "tests/fixtures/precision/overflow_fp16/model.onnx", size="0.4 MB", seconds=13),
    Generator("make_optimized_fixtures.py", "tests/fixtures/optimized/: lib models through "
              "ONNX Runtime's transformer optimiser and onnxslim (needs lib/)",
              "tests/fixtures/optimized/manifest.json", size="1.8 MB", seconds=8),
    Generator("make_drift_fixtures.py", "tests/fixtures/drift/: accumulated drift, with and "
              "without a fault, and a clean network that amplifies rounding",
              "tests/fixtures/drift/rounding_only/model.onnx",
              size="1.6 MB", seconds=10),
    Generator("make_signature_fixtures.py", "tests/fixtures/signature/: pairs whose two "
              "files come from different tools", "tests/fixtures/signature/manifest.json",
              size="0.7 MB", seconds=12),
    Generator("make_control_flow_fixtures.py", "tests/fixtures/control_flow/: a scripted "
              "model exported with an ONNX Loop (constant trip count) and If (on data), and a "
              "fault inside the loop body; the same archive with a dynamic batch (the Loop stays)",
              "tests/fixtures/control_flow/dynamic_loop/model.onnx", size="0.1 MB",
              seconds=12),
    Generator("make_memory_fixture.py", "tests/fixtures/big_activations_legacy/: "
              "activations far larger than the weights (--max-memory)",
              "tests/fixtures/big_activations_legacy/model.onnx", size="0.1 MB", seconds=19),
    Generator("make_sample_fault.py", "tests/fixtures/fault_one_sample/: a fault only one "
              "input sample in eight triggers", "tests/fixtures/fault_one_sample/model.onnx",
              size="0.1 MB", seconds=6),
    Generator("make_fuzz_regressions.py", "tests/fixtures/fuzz_regressions/: hand-made "
              "hostile files for the file readers",
              "tests/fixtures/fuzz_regressions/onnx_model", size="0.1 MB", seconds=1),
    Generator("make_custom_op_fixture.py", "tests/fixtures/custom_op_lib_legacy/: a real "
              "compiled custom op (runs scripts/build_custom_ops.sh first)",
              "tests/fixtures/custom_op_lib_legacy/meta.json", size="0.03 MB", seconds=10),
    Generator("make_library_op_fixture.py", "tests/fixtures/library_op_legacy/: a model "
              "calling torchvision::roi_align, whose library align-check finds itself",
              "tests/fixtures/library_op_legacy/model.onnx", size="0.02 MB", seconds=8),
    Generator("make_fused_fixtures.py", "tests/fixtures/fused/: a TransformerEncoder traced "
              "under no_grad (one fused op per layer) and a fault inside its self-attention",
              "tests/fixtures/fused/fault_self_attn/expected.json", size="0.2 MB", seconds=19),
    Generator("make_production_fixtures.py", "tests/fixtures/production/: a model ONNX "
              "Runtime's GELU approximation changes at the extended level, and a clean one",
              "tests/fixtures/production/gelu_head/model.onnx", size="0.4 MB", seconds=10,
              quiet=True),
    Generator("make_quantized_fixtures.py", "tests/fixtures/quantized/: QDQ, QOperator and "
              "dynamic int8 models by onnxruntime.quantization, with calibrated BatchNorm",
              "tests/fixtures/quantized/cnn_qdq/model.onnx", size="3.2 MB", seconds=30,
              quiet=True),
    Generator("make_deep_fixtures.py", "tests/fixtures/deep/: YOLOv8n and YOLO11n with "
              "recalibrated BatchNorm", "tests/fixtures/deep/manifest.json",
              committed=False, size="91 MB", seconds=25, quiet=True),
)
