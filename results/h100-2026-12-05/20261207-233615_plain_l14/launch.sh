#!/usr/bin/env bash
# connector-tax launch script: config=plain
# written 2026-12-07T23:36:23Z by launch/launch_plain.sh on vm
# Re-run: bash launch.sh > vllm_stdout.log 2> vllm_stderr.log
set -e
export AGENTIC_STEP_LOG_PATH=/tmp/res/h100/20261207-233615_plain_l14/engine_step_raw
export CUDA_DEVICE_ORDER=PCI_BUS_ID
export CUDA_VISIBLE_DEVICES=0
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib
export NCCL_VERSION=2.28.3-1
export PYTHONPATH=/work/main/tools:/tmp/site
export TORCH_CUDA_ARCH_LIST=9.0a
export VLLM_PORT=21000
export VLLM_USE_FLASHINFER_SAMPLER=0
exec /tmp/site/bin/vllm serve /tmp/ctax-model/qwen3-coder-30b-a3b --served-model-name qwen3-coder-30b-a3b --host 127.0.0.1 --port 8000 --tensor-parallel-size 1 --max-model-len 40000 --enable-prefix-caching --enable-chunked-prefill --max-num-batched-tokens 8192 --load-format dummy --gpu-memory-utilization 0.9
