//! Grad mode is per thread, as in PyTorch: `no_grad` on one thread does not stop
//! another thread's recording, and the engine switches it for the duration of a
//! backward pass (on for `create_graph`, off otherwise).
use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
    static INFERENCE: Cell<bool> = const { Cell::new(false) };
}

pub fn grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Set this thread's grad mode; returns the previous one.
pub fn set_grad_enabled(mode: bool) -> bool {
    GRAD_ENABLED.with(|g| g.replace(mode))
}

/// Whether this thread is inside `inference_mode()`.
pub fn inference_mode() -> bool {
    INFERENCE.with(|g| g.get())
}

/// Enter or leave inference mode (grad mode follows); returns the previous (inference, grad) pair.
pub fn set_inference_mode(on: bool) -> (bool, bool) {
    let prev = (INFERENCE.with(|g| g.replace(on)), grad_enabled());
    if on {
        set_grad_enabled(false);
    }
    prev
}

/// This thread's (grad, inference) modes, to carry onto another thread (`restore`).
pub fn snapshot() -> (bool, bool) {
    (grad_enabled(), inference_mode())
}

/// Set this thread's (grad, inference) modes as `snapshot` gave them; returns the previous pair.
pub fn restore(state: (bool, bool)) -> (bool, bool) {
    let prev = snapshot();
    GRAD_ENABLED.with(|g| g.set(state.0));
    INFERENCE.with(|g| g.set(state.1));
    prev
}

/// Runs `f` with grad mode set to `mode`, restoring the previous mode after (also on error).
pub fn with_grad_mode<T>(mode: bool, f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            set_grad_enabled(self.0);
        }
    }
    let _r = Restore(set_grad_enabled(mode));
    f()
}
