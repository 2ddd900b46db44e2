/* Horovod: lets ranks of several simulated SageMaker hosts share one Open MPI node (and so
 * shared memory) while every MPI library call still sees the hosts apart.
 *
 * Open MPI sends messages between two nodes over TCP, even when both "nodes" are this
 * machine, and Horovod (like most MPI programs) finds its local ranks with
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED). The local runner starts all ranks on one node
 * and preloads this library into each: a shared-type split becomes a split by the rank's
 * simulated host (TRAINPIPE_HOST_INDEX, set per rank by rank_exec.py), so
 * hvd.local_rank(), local_size() and cross_rank() are what SageMaker gives, while the bytes
 * move through shared memory. Any other split, or a process without the variable, gets
 * Open MPI's own behaviour (the PMPI profiling interface, MPI standard chapter 15).
 *
 * Built by pipeline/local/hosts/shared_memory.py with mpicc, cached by source hash and MPI. */
#include <mpi.h>
#include <stdlib.h>

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm)
{
    const char *host = getenv("TRAINPIPE_HOST_INDEX");
    if (split_type == MPI_COMM_TYPE_SHARED && host != NULL && *host != '\0') {
        char *end = NULL;
        long color = strtol(host, &end, 10);
        if (end != host && *end == '\0' && color >= 0 && color < 1000000)
            return PMPI_Comm_split(comm, (int)color, key, newcomm);
    }
    return PMPI_Comm_split_type(comm, split_type, key, info, newcomm);
}
