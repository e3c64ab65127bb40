#!/bin/bash
# `mpirun` of the OpenMPI that xtask/h200/mpi-env.sh unpacked under /opt/mpi,
# relocated there, as root, ranks allowed past the cores:
#   xtask/h200/mpirun.sh -np 3 BINARY ARGS...
R=/opt/mpi
export OPAL_PREFIX=$R/usr OPAL_EXEC_PREFIX=$R/usr OPAL_BINDIR=$R/usr/bin
export OPAL_LIBDIR=$R/usr/lib/x86_64-linux-gnu/openmpi/lib
export OPAL_PKGLIBDIR=$R/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
export OPAL_DATADIR=$R/usr/share OPAL_PKGDATADIR=$R/usr/share/openmpi
export OPAL_SYSCONFDIR=$R/etc/openmpi PATH=$R/usr/bin:$PATH
export LD_LIBRARY_PATH=$R/usr/lib/x86_64-linux-gnu:$R/usr/lib/x86_64-linux-gnu/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
exec $R/usr/bin/mpirun.openmpi --allow-run-as-root --oversubscribe "$@"
