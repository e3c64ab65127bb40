#!/bin/bash
# Run HERE (not on the device), once: downloads the Vulkan loader + glvnd/EGL
# debs (amd64) into <repo>/.gl, which the device image lacks. Pass `.gl` in
# the device run's `carry`, then `source xtask/h200/env.sh` there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
grep -qxF '/.gl/' .git/info/exclude || echo /.gl/ >>.git/info/exclude   # keep .gl untracked
mkdir -p .gl /tmp/amd64/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
apt-get $o update >/dev/null
(cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
ls -l .gl
