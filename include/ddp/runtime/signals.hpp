#pragma once
// Stop-on-signal: Slurm sends SIGUSR1 (with `#SBATCH --signal=B:USR1@120`) or SIGTERM before a time
// limit or preemption. The first such signal only sets a flag; the training loop sees it at the
// next step boundary, all ranks agree, a mid-epoch snapshot is written and the process exits with
// kExitStopped so a requeued job resumes. A second SIGINT/SIGTERM exits at once, unless it comes
// within a second of the first (Slurm's step daemon and srun both deliver one stop: the same request).
namespace ddp::runtime {

// Exit code of a run stopped by a signal after writing its snapshot (EX_TEMPFAIL: "try again").
inline constexpr int kExitStopped = 75;

void install_stop_handlers();
// True once SIGTERM, SIGUSR1 or SIGINT arrived.
bool stop_requested();
// The signal that set the flag (0 when none).
int stop_signal();

}  // namespace ddp::runtime
