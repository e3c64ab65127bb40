# Source ON THE DEVICE (from the repo root, `.mpi` carried, see
# fetch-mpi.sh): unpacks OpenMPI under /opt/mpi once. Then run MPI jobs with
# `xtask/h200/mpirun.sh ARGS...` (the relocated `mpirun`, its libraries on
# LD_LIBRARY_PATH for the job only: the carried libraries must not shadow
# the image's in other programs). Checked here (2026-12-04) in a mount
# namespace that hid the system's OpenMPI: the MPI suite passed 12 of 12
# under it. Not yet run on the device.
_mpi_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
_mpi_root=/opt/mpi
(
  flock 9
  if [ ! -e "$_mpi_root/.unpacked" ]; then
    mkdir -p "$_mpi_root"
    for f in "$_mpi_repo"/.mpi/*.deb; do dpkg -x "$f" "$_mpi_root"; done
    touch "$_mpi_root/.unpacked"
  fi
) 9>/tmp/.h200-mpi.lock
unset _mpi_repo _mpi_root
