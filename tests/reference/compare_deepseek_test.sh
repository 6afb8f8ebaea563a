#!/bin/bash
# The CPU engine's DeepSeek-V3 forward against the PyTorch reference (python3-torch,
# from `tools/lockstep setup`). See compare_deepseek.py.
set -euo pipefail
here=tests/reference
exec python3 "$here/compare_deepseek.py" "$here/engine_logits" "${LOCKSTEP_TEST_SEED:-11}"
