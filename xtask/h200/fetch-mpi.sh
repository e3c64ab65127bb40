#!/bin/bash
# Run HERE (not on the device), once: downloads OpenMPI (Debian 12's 4.1.4)
# and the libraries it needs that the device image may lack, as amd64 debs,
# into <repo>/.mpi. Pass `.mpi` in the device run's `carry`, then
# `source xtask/h200/mpi-env.sh` there: it unpacks them under /opt/mpi (not
# over /, where they could shadow the image's own libraries) and points
# OpenMPI at that prefix.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
grep -qxF '/.mpi/' .git/info/exclude 2>/dev/null || echo /.mpi/ >>.git/info/exclude
mkdir -p .mpi /tmp/amd64/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
apt-get $o update >/dev/null
(cd .mpi && apt-get $o download \
  openmpi-bin libopenmpi3 openmpi-common libhwloc15 libevent-core-2.1-7 \
  libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0 libibverbs1 librdmacm1 \
  libnl-3-200 libnl-route-3-200 libnuma1 libpsm2-2 libpsm-infinipath1 \
  libmunge2 libpciaccess0 libxnvctrl0 libx11-6 libxext6 libxcb1 libxau6 \
  libxdmcp6 libbsd0 libmd0 ocl-icd-libopencl1 libxml2 libicu72 libltdl7)
du -sh .mpi
