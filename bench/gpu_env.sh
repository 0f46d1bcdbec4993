# Sourced by the multi-GPU scripts (gpu_shmem.sh, gpu_collectives.sh): $OUT made, the environment every
# multi-GPU command needs, and the GPU's name and count for result file names.
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1
# NVLink multicast can take a shared host's GPUs down: keep it off everywhere (launch() also does).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ngpu=$(nvidia-smi -L | wc -l)
# "NVIDIA H100 80GB HBM3" -> NVIDIA-H100: the first two words of the name (bench/results naming).
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print $1"-"$2}' | tr -cd 'A-Za-z0-9_-')
