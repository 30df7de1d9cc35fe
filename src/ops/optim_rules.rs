//! Fused steps of the other `torch.optim` optimizers (RMSprop, Adagrad, Adadelta,
//! Adamax, NAdam, RAdam; behind `_core._optim_step`): one pass per parameter that
//! updates it and its state buffers in place, the arithmetic following PyTorch's
//! single-tensor CPU path operation by operation (its default on CPU). Scalars
//! (bias corrections, decayed learning rates) are computed once in f64 and rounded
//! to the element type, as torch's CPU kernels round a Python scalar.
use super::float::Float;

/// One optimizer's hyper-parameters for a group, plus one parameter's step count
/// (`step`, after this step) and, for NAdam, its `mu_product` after this step.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Rule {
    RmsProp { lr: f64, alpha: f64, eps: f64, weight_decay: f64, momentum: f64, centered: bool, maximize: bool },
    Adagrad { lr: f64, lr_decay: f64, eps: f64, weight_decay: f64, maximize: bool, step: f64 },
    Adadelta { lr: f64, rho: f64, eps: f64, weight_decay: f64, maximize: bool },
    Adamax { lr: f64, beta1: f64, beta2: f64, eps: f64, weight_decay: f64, maximize: bool, step: f64 },
    NAdam(AdamLike, NAdamMu),
    RAdam(AdamLike),
}

/// The options NAdam and RAdam share with Adam.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AdamLike {
    pub(crate) lr: f64,
    pub(crate) beta1: f64,
    pub(crate) beta2: f64,
    pub(crate) eps: f64,
    pub(crate) weight_decay: f64,
    pub(crate) decoupled: bool,
    pub(crate) maximize: bool,
    pub(crate) step: f64,
}

/// NAdam's momentum schedule at one step: `mu`, `mu_next` and the running product
/// of the `mu`s including this step's (`mu_product`, kept by the caller).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NAdamMu {
    pub(crate) mu: f64,
    pub(crate) mu_next: f64,
    pub(crate) mu_product: f64,
}

impl NAdamMu {
    /// torch: `mu = beta1 * (1 - 0.5 * 0.96 ** (step * momentum_decay))`, likewise
    /// `mu_next` at `step + 1`, and `mu_product *= mu` on a float32 state tensor
    /// (hence the float32 rounding of the product, as torch keeps it).
    pub(crate) fn at(beta1: f64, momentum_decay: f64, step: f64, prev_product: f64) -> NAdamMu {
        let mu = beta1 * (1.0 - 0.5 * 0.96f64.powf(step * momentum_decay));
        let mu_next = beta1 * (1.0 - 0.5 * 0.96f64.powf((step + 1.0) * momentum_decay));
        let mu_product = f64::from((prev_product as f32) * (mu as f32));
        NAdamMu { mu, mu_next, mu_product }
    }
}

impl Rule {
    /// The state buffers the rule updates, in the order the kernel takes them.
    pub(crate) fn buffer_names(&self) -> Vec<&'static str> {
        match self {
            Rule::RmsProp { momentum, centered, .. } => {
                let mut v = vec!["square_avg"];
                if *centered {
                    v.push("grad_avg");
                }
                if *momentum > 0.0 {
                    v.push("momentum_buffer");
                }
                v
            }
            Rule::Adagrad { .. } => vec!["sum"],
            Rule::Adadelta { .. } => vec!["square_avg", "acc_delta"],
            Rule::Adamax { .. } => vec!["exp_avg", "exp_inf"],
            Rule::NAdam(..) | Rule::RAdam(..) => vec!["exp_avg", "exp_avg_sq"],
        }
    }
}

/// `torch.lerp(a, b, w)`: torch picks the form by `|w|` for accuracy.
#[inline(always)]
fn lerp<T: Float>(a: T, b: T, w: T, small: bool) -> T {
    if small {
        a + w * (b - a)
    } else {
        b - (b - a) * (T::ONE - w)
    }
}

/// `torch.maximum`: the larger, or NaN if either is.
#[inline(always)]
fn maximum<T: Float>(a: T, b: T) -> T {
    if a.is_nan() {
        a
    } else if b.is_nan() || b > a {
        b
    } else {
        a
    }
}

/// `grad` as torch's step sees it: negated under `maximize`, plus L2 decay `wd * p`.
#[inline(always)]
fn decayed<T: Float>(g: T, p: T, sign: T, wd: T, l2: bool) -> T {
    if l2 {
        g * sign + wd * p
    } else {
        g * sign
    }
}

fn sign_of<T: Float>(maximize: bool) -> T {
    T::of(if maximize { -1.0 } else { 1.0 })
}

/// One parameter's update under `rule`: `p` and `bufs` (as `Rule::buffer_names`) in
/// place, from the gradient `g`.
pub(crate) fn rule_kernel<T: Float>(rule: &Rule, p: &mut [T], g: &[T], bufs: &mut [&mut [T]]) {
    let n = p.len();
    let g = &g[..n];
    match *rule {
        Rule::RmsProp { lr, alpha, eps, weight_decay, momentum, centered, maximize } => {
            // torch: square_avg.mul_(alpha).addcmul_(g, g, 1 - alpha); centered:
            // grad_avg.lerp_(g, 1 - alpha), avg = sqrt(square_avg - grad_avg^2); avg += eps;
            // momentum: buf.mul_(momentum).addcdiv_(g, avg), p.add_(buf, -lr); else
            // p.addcdiv_(g, avg, -lr).
            let (sign, wd, l2) = (sign_of::<T>(maximize), T::of(weight_decay), weight_decay != 0.0);
            let (a, c) = (T::of(alpha), T::of(1.0 - alpha));
            let (w, small) = (T::of(1.0 - alpha), (1.0 - alpha).abs() < 0.5);
            let (e, neg_lr, mom) = (T::of(eps), T::of(-lr), T::of(momentum));
            let (sq, rest) = bufs.split_first_mut().expect("square_avg");
            let (ga, rest): (Option<&mut [T]>, &mut [&mut [T]]) = if centered {
                let (x, r) = rest.split_first_mut().expect("grad_avg");
                (Some(&mut x[..n]), r)
            } else {
                (None, rest)
            };
            let mut buf: Option<&mut [T]> = if momentum > 0.0 { Some(&mut rest[0][..n]) } else { None };
            let mut ga = ga;
            let sq = &mut sq[..n];
            for i in 0..n {
                let gv = decayed(g[i], p[i], sign, wd, l2);
                let s = sq[i] * a + c * gv * gv;
                sq[i] = s;
                let avg = match ga.as_deref_mut() {
                    Some(ga) => {
                        let m = lerp(ga[i], gv, w, small);
                        ga[i] = m;
                        (s - m * m).sqrt()
                    }
                    None => s.sqrt(),
                } + e;
                match buf.as_deref_mut() {
                    Some(b) => {
                        let nb = b[i] * mom + gv / avg;
                        b[i] = nb;
                        p[i] += neg_lr * nb;
                    }
                    None => p[i] += neg_lr * (gv / avg),
                }
            }
        }
        Rule::Adagrad { lr, lr_decay, eps, weight_decay, maximize, step } => {
            // torch: clr = lr / (1 + (step - 1) * lr_decay); sum.addcmul_(g, g);
            // p.addcdiv_(g, sum.sqrt() + eps, -clr).
            let (sign, wd, l2) = (sign_of::<T>(maximize), T::of(weight_decay), weight_decay != 0.0);
            let neg_clr = T::of(-(lr / (1.0 + (step - 1.0) * lr_decay)));
            let e = T::of(eps);
            let sum = &mut bufs[0][..n];
            for i in 0..n {
                let gv = decayed(g[i], p[i], sign, wd, l2);
                let s = sum[i] + gv * gv;
                sum[i] = s;
                p[i] += neg_clr * (gv / (s.sqrt() + e));
            }
        }
        Rule::Adadelta { lr, rho, eps, weight_decay, maximize } => {
            // torch: square_avg.mul_(rho).addcmul_(g, g, 1 - rho); delta =
            // sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g; acc_delta likewise with
            // delta; p.add_(delta, -lr).
            let (sign, wd, l2) = (sign_of::<T>(maximize), T::of(weight_decay), weight_decay != 0.0);
            let (r, c, e, neg_lr) = (T::of(rho), T::of(1.0 - rho), T::of(eps), T::of(-lr));
            let (sq, rest) = bufs.split_first_mut().expect("square_avg");
            let (sq, acc) = (&mut sq[..n], &mut rest[0][..n]);
            for i in 0..n {
                let gv = decayed(g[i], p[i], sign, wd, l2);
                let s = sq[i] * r + c * gv * gv;
                sq[i] = s;
                let delta = (acc[i] + e).sqrt() / (s + e).sqrt() * gv;
                acc[i] = acc[i] * r + c * delta * delta;
                p[i] += neg_lr * delta;
            }
        }
        Rule::Adamax { lr, beta1, beta2, eps, weight_decay, maximize, step } => {
            // torch: exp_avg.lerp_(g, 1 - beta1); exp_inf = maximum(exp_inf * beta2,
            // |g| + eps); p.addcdiv_(exp_avg, exp_inf, -lr / (1 - beta1^step)).
            let (sign, wd, l2) = (sign_of::<T>(maximize), T::of(weight_decay), weight_decay != 0.0);
            let (w, small) = (T::of(1.0 - beta1), (1.0 - beta1).abs() < 0.5);
            let (b2, e) = (T::of(beta2), T::of(eps));
            let neg_clr = T::of(-(lr / (1.0 - beta1.powf(step))));
            let (m, rest) = bufs.split_first_mut().expect("exp_avg");
            let (m, u) = (&mut m[..n], &mut rest[0][..n]);
            for i in 0..n {
                let gv = decayed(g[i], p[i], sign, wd, l2);
                let mv = lerp(m[i], gv, w, small);
                m[i] = mv;
                let a = if gv < T::ZERO { -gv } else { gv };
                let uv = maximum(u[i] * b2, a + e);
                u[i] = uv;
                p[i] += neg_clr * (mv / uv);
            }
        }
        Rule::NAdam(h, mu) => {
            // torch: decoupled p.mul_(1 - lr * wd) or L2; exp_avg.lerp_; exp_avg_sq as
            // Adam's; denom = sqrt(exp_avg_sq / bc2) + eps; p.addcdiv_(g, denom, -lr * (1 -
            // mu) / (1 - mu_product)); p.addcdiv_(exp_avg, denom, -lr * mu_next / (1 -
            // mu_product * mu_next)).
            let (sign, wd) = (sign_of::<T>(h.maximize), T::of(h.weight_decay));
            let l2 = h.weight_decay != 0.0 && !h.decoupled;
            let decay = T::of(if h.decoupled && h.weight_decay != 0.0 { 1.0 - h.lr * h.weight_decay } else { 1.0 });
            let (w, small) = (T::of(1.0 - h.beta1), (1.0 - h.beta1).abs() < 0.5);
            let (b2, c2, e) = (T::of(h.beta2), T::of(1.0 - h.beta2), T::of(h.eps));
            let bc2 = T::of(1.0 - h.beta2.powf(h.step));
            let cg = T::of(-h.lr * (1.0 - mu.mu) / (1.0 - mu.mu_product));
            let cm = T::of(-h.lr * mu.mu_next / (1.0 - mu.mu_product * mu.mu_next));
            let (m, rest) = bufs.split_first_mut().expect("exp_avg");
            let (m, v) = (&mut m[..n], &mut rest[0][..n]);
            for i in 0..n {
                let pv = p[i] * decay;
                let gv = decayed(g[i], pv, sign, wd, l2);
                let mv = lerp(m[i], gv, w, small);
                let vv = v[i] * b2 + c2 * gv * gv;
                m[i] = mv;
                v[i] = vv;
                let denom = (vv / bc2).sqrt() + e;
                let p1 = pv + cg * (gv / denom);
                p[i] = p1 + cm * (mv / denom);
            }
        }
        Rule::RAdam(h) => {
            // torch: exp_avg, exp_avg_sq as Adam's; rho_t = rho_inf - 2 step beta2^step /
            // bc2; when rho_t > 5: p -= exp_avg / bc1 * lr * (sqrt(bc2) / (sqrt(exp_avg_sq)
            // + eps)) * rect, else p -= exp_avg / bc1 * lr.
            let (sign, wd) = (sign_of::<T>(h.maximize), T::of(h.weight_decay));
            let l2 = h.weight_decay != 0.0 && !h.decoupled;
            let decay = T::of(if h.decoupled && h.weight_decay != 0.0 { 1.0 - h.lr * h.weight_decay } else { 1.0 });
            let (w, small) = (T::of(1.0 - h.beta1), (1.0 - h.beta1).abs() < 0.5);
            let (b2, c2, e) = (T::of(h.beta2), T::of(1.0 - h.beta2), T::of(h.eps));
            let bc1 = 1.0 - h.beta1.powf(h.step);
            let bc2 = 1.0 - h.beta2.powf(h.step);
            let rho_inf = 2.0 / (1.0 - h.beta2) - 1.0;
            let rho_t = rho_inf - 2.0 * h.step * h.beta2.powf(h.step) / bc2;
            let rect = if rho_t > 5.0 {
                Some(((rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t)).sqrt())
            } else {
                None
            };
            let (tbc1, tlr, tbc2s) = (T::of(bc1), T::of(h.lr), T::of(bc2.sqrt()));
            let (m, rest) = bufs.split_first_mut().expect("exp_avg");
            let (m, v) = (&mut m[..n], &mut rest[0][..n]);
            for i in 0..n {
                let pv = p[i] * decay;
                let gv = decayed(g[i], pv, sign, wd, l2);
                let mv = lerp(m[i], gv, w, small);
                let vv = v[i] * b2 + c2 * gv * gv;
                m[i] = mv;
                v[i] = vv;
                let upd = mv / tbc1 * tlr;
                let upd = match rect {
                    Some(r) => upd * (tbc2s / (vv.sqrt() + e)) * T::of(r),
                    None => upd,
                };
                p[i] = pv - upd;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_step(rule: Rule, p: f64, g: f64, bufs: &mut [f64]) -> f64 {
        let mut pv = [p];
        let mut bv: Vec<[f64; 1]> = bufs.iter().map(|&b| [b]).collect();
        let mut refs: Vec<&mut [f64]> = bv.iter_mut().map(|b| &mut b[..]).collect();
        rule_kernel(&rule, &mut pv, &[g], &mut refs);
        for (dst, src) in bufs.iter_mut().zip(bv.iter()) {
            *dst = src[0];
        }
        pv[0]
    }

    fn adam_like(step: f64) -> AdamLike {
        AdamLike { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, decoupled: false, maximize: false, step }
    }

    #[test]
    fn adagrad_first_step_is_normalised_gradient() {
        let r = Rule::Adagrad { lr: 0.5, lr_decay: 0.0, eps: 0.0, weight_decay: 0.0, maximize: false, step: 1.0 };
        let mut sum = [0.0];
        assert_eq!(one_step(r, 1.0, -4.0, &mut sum), 1.5);
        assert_eq!(sum[0], 16.0);
    }

    #[test]
    fn radam_takes_the_unrectified_step_while_rho_t_is_small() {
        // Step 1: exp_avg / bc1 = g exactly, so p -= lr * g.
        let mut b = [0.0, 0.0];
        let p = one_step(Rule::RAdam(adam_like(1.0)), 1.0, 2.0, &mut b);
        assert!((p - 0.8).abs() < 1e-15, "{p}");
        // Far into training the rectified, adaptive step applies: about lr * sign(g).
        let mut b = [2.0, 4.0];
        let p = one_step(Rule::RAdam(adam_like(1000.0)), 0.0, 2.0, &mut b);
        assert!(p < 0.0 && p > -0.2, "{p}");
    }

    #[test]
    fn nadam_mu_product_is_kept_in_float32() {
        let mu = NAdamMu::at(0.9, 4e-3, 1.0, 1.0);
        assert_eq!(mu.mu_product, f64::from(mu.mu as f32));
        assert!(mu.mu_next > mu.mu);
    }

    #[test]
    fn adamax_propagates_nan_through_the_infinity_norm() {
        let r = Rule::Adamax { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, maximize: false, step: 1.0 };
        let mut b = [0.0, 0.0];
        assert!(one_step(r, 1.0, f64::NAN, &mut b).is_nan());
        assert!(b[1].is_nan());
    }

    #[test]
    fn buffer_order_follows_the_options() {
        let r = Rule::RmsProp { lr: 0.1, alpha: 0.9, eps: 1e-8, weight_decay: 0.0, momentum: 0.5, centered: true, maximize: false };
        assert_eq!(r.buffer_names(), ["square_avg", "grad_avg", "momentum_buffer"]);
        let r = Rule::RmsProp { lr: 0.1, alpha: 0.9, eps: 1e-8, weight_decay: 0.0, momentum: 0.0, centered: false, maximize: false };
        assert_eq!(r.buffer_names(), ["square_avg"]);
    }
}
