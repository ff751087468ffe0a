#pragma once
// Stop-on-signal: Slurm sends SIGUSR1 (with `#SBATCH --signal=B:USR1@120`) or SIGTERM before a time
// limit or preemption. The first such signal only sets a flag; the training loop sees it at the
// next step boundary, all ranks agree, a mid-epoch snapshot is written and the process exits with
// kExitStopped so a requeued job resumes. A second SIGINT/SIGTERM exits at once, unless it comes
// within a second of the first (Slurm's step daemon and srun both deliver one stop: the same
// request).
namespace ddp::runtime {

// Exit code of a run stopped by a signal after writing its snapshot (EX_TEMPFAIL: "try again").
inline constexpr int kExitStopped = 75;

// Installs the handler and blocks the stop signals in the calling thread, so that every thread
// created later has them blocked too. Call first (before any thread exists).
void install_stop_handlers();
// Starts the one thread that takes the stop signals (sigwait); signals sent before it starts
// wait, pending. Call once threads may be created (first thing in main).
void start_signal_thread();
// True once SIGTERM, SIGUSR1 or SIGINT arrived.
bool stop_requested();
// The signal that set the flag (0 when none).
int stop_signal();

}  // namespace ddp::runtime
