# Source ON THE DEVICE (nvidia-h200*), from the repo root, with `.gl` carried:
#   source xtask/h200/env.sh && ./your-binary
# Verified 2026-12-02 with wgpu 30.0.2: Vulkan adapter "NVIDIA H200"
# (driver 580.159.04), device with adapter limits + TIMESTAMP_QUERY works.
_h200_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# The image has no Vulkan loader / glvnd: unpack the debs from fetch-libs.sh.
# Once per machine, under a lock: sourcing it from several shells at once
# used to re-extract libraries while another shell's test binary was loading
# them (a test process died with SIGSEGV before its first test ended, in the
# one run that overlapped an extraction; see docs/bench/h200-tests.txt).
(
  flock 9
  if [ ! -e /tmp/.h200-libs-unpacked ]; then
    for f in "$_h200_root"/.gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    touch /tmp/.h200-libs-unpacked
  fi
) 9>/tmp/.h200-libs.lock
# Point the loader at NVIDIA's ICD (it also worked without these, but this is
# the documented setting); EGL vendor file for the GL backend.
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
# Use Vulkan only: the GL adapter ("NVIDIA H200/PCIe/SSE2", GL 3.3) is listed
# but request_device fails there with Device(Lost) (no compute shaders in 3.3).
export WGPU_BACKEND=vulkan
unset _h200_root
