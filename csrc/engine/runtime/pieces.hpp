// Running the pieces of one large host copy or conversion on several cores:
// the calling thread and a small team of helper threads claim pieces in
// order. The helpers are not the transfer executor's workers (whose jobs may
// block in user hooks and which run at batch priority, so that a woken one
// does not preempt the thread that queued a move): a piece helper must start
// at once, or the caller has already copied everything by the time it
// arrives. So helpers run at normal priority and, after a piece, poll for
// the next call for a short while before they sleep, as an OpenMP team
// does: a loop of large copies keeps them awake, an idle process does not.
#pragma once
#include <cstddef>
#include <functional>

namespace sw {

// How long a helper polls for more pieces after its last one before it
// sleeps, and the longest a caller that has run out of pieces polls for the
// helpers' last ones before it sleeps (about two of its own pieces' time;
// both then block on a condition variable).
inline constexpr long long kPieceHelperSpinNs = 200'000;
inline constexpr long long kPieceCallerSpinNs = 200'000;

// Runs piece(i) for every i in [0, n): this thread and up to ways - 1 piece
// helpers (ways <= 0: the executor's core thread count) claim pieces in
// order; returns when every piece has run. A helper that starts late only
// takes what is left (and touches nothing once all pieces are claimed, so
// piece may refer to the caller's stack). piece must not throw. When no
// helper can be started this thread runs every piece.
void run_pieces(size_t n, const std::function<void(size_t)>& piece, int ways = 0);

// Piece helper threads started so far (they are started on first use and
// never exit; 0 in a fresh process or forked child).
size_t piece_helper_count();

}  // namespace sw
