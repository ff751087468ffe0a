#pragma once
// A process started without a launcher (no mpirun, no srun with PMIx) becomes an MPI singleton.
// How ddp_train (and the unit tests) set Open MPI up for that before MPI_Init.

namespace ddp::runtime {

// Without a launcher's variables in the environment: an isolated singleton (no orted forked to
// probe the hardware, about 0.4 s a start) whose session directory is its own. Open MPI names
// every isolated singleton's session directory alike (<tmp>/ompi.<host>.<uid>/jf.0/1/0) and
// removes it at exit, so two at once on a host race: one's clean-up deletes the path the other is
// creating, and its MPI_Init aborts. Ours is in the same place (orte_tmpdir_base, else TMPDIR...)
// with the pid in its name. A user's own orte_top_session_dir or isolated = 0 wins. Under a
// launcher: nothing.
void prepare_singleton_environment();

}  // namespace ddp::runtime
