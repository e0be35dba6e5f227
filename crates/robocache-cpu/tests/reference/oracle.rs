//! A plain f64 oracle of docs/semantics.md, written from the spec and not from the
//! implementation: linear scans, no shared helpers, every value in f64.

use robocache_cpu::strategies::{StreamCase, TimesCase};
use robocache_cpu::{Boundary, ChannelSpec, Method};

/// What the oracle expects of one output element.
#[derive(Clone, Copy, Debug)]
pub enum Expect {
    /// Exactly this sample value (selection methods, fill, exact hits).
    Exact(f64),
    /// A linear blend: `value` in f64, and the magnitudes the error scales with.
    Linear { value: f64, scale: f64 },
    /// A component of a unit quaternion.
    Slerp(f64),
}

fn times_of(times: &TimesCase, row: usize, len: usize) -> Vec<f64> {
    match times {
        TimesCase::Shared(t) => t[..len].to_vec(),
        TimesCase::PerRow(t) => t[row * len..(row + 1) * len].to_vec(),
        TimesCase::Uniform { start, hz } => (0..len).map(|i| start + i as f64 / hz).collect(),
    }
}

fn target_of(targets: &TimesCase, row: usize, k: usize, target_len: usize) -> f64 {
    match targets {
        TimesCase::Shared(t) => t[k],
        TimesCase::PerRow(t) => t[row * target_len + k],
        TimesCase::Uniform { start, hz } => start + k as f64 / hz,
    }
}

fn methods(spec: &ChannelSpec, channels: usize) -> Vec<Method> {
    match spec {
        ChannelSpec::All(m) => vec![*m; channels],
        ChannelSpec::Groups(groups) => groups.iter().flat_map(|g| g.range.clone().map(move |_| g.method)).collect(),
    }
}

fn slerp_oracle(a: [f64; 4], b: [f64; 4], t: f64) -> [f64; 4] {
    let unit = |q: [f64; 4]| {
        let n = q.iter().map(|v| v * v).sum::<f64>().sqrt();
        q.map(|v| v / n)
    };
    let a = unit(a);
    let mut b = unit(b);
    let mut d: f64 = (0..4).map(|k| a[k] * b[k]).sum();
    if d < 0.0 {
        b = b.map(|v| -v);
        d = -d;
    }
    let theta = d.min(1.0).acos();
    let r: [f64; 4] = if theta < 1e-6 {
        std::array::from_fn(|k| (1.0 - t) * a[k] + t * b[k])
    } else {
        std::array::from_fn(|k| (((1.0 - t) * theta).sin() * a[k] + (t * theta).sin() * b[k]) / theta.sin())
    };
    unit(r)
}

/// The expected output `[B, T, D]` and valid mask `[B, T]`; `data` is the
/// stream's data as the dtype under test holds it, in f64; `fill` is the fill
/// value as that dtype holds it.
pub fn resample(
    stream: &StreamCase,
    data: &[f64],
    targets: &TimesCase,
    target_len: usize,
    fill: f64,
) -> (Vec<Expect>, Vec<bool>) {
    let [batch, len, channels] = stream.shape;
    let methods = methods(&stream.spec.channels, channels);
    let mut out = Vec::new();
    let mut valid = Vec::new();
    for row in 0..batch {
        let n = stream.lengths.as_ref().map_or(len, |l| l[row]);
        let s = times_of(&stream.times, row, len)[..n].to_vec();
        let x = |i: usize, c: usize| data[(row * len + i) * channels + c];
        for k in 0..target_len {
            let q = target_of(targets, row, k, target_len);
            let inside = s[0] <= q && q <= s[n - 1];
            valid.push(inside);
            // Largest i with s_i <= q, by a linear scan.
            let mut i = 0;
            for (j, &sj) in s.iter().enumerate() {
                if sj <= q {
                    i = j;
                }
            }
            let below = q < s[0];
            let above = q > s[n - 1];
            let mut c = 0;
            while c < channels {
                let method = methods[c];
                if !inside {
                    if let Boundary::Fill(_) = stream.spec.boundary {
                        out.push(Expect::Exact(fill));
                        c += 1;
                        continue;
                    }
                }
                match method {
                    Method::Previous => {
                        let j = if below {
                            0
                        } else if above {
                            n - 1
                        } else {
                            i
                        };
                        out.push(Expect::Exact(x(j, c)));
                    }
                    Method::Nearest => {
                        let j = if below {
                            0
                        } else if above || i == n - 1 {
                            n - 1
                        } else if s[i + 1] - q < q - s[i] {
                            i + 1
                        } else {
                            i
                        };
                        out.push(Expect::Exact(x(j, c)));
                    }
                    Method::Linear => {
                        let extrapolate = stream.spec.boundary == Boundary::Extrapolate && n >= 2;
                        let (j0, j1) = if below && extrapolate {
                            (0, 1)
                        } else if above && extrapolate {
                            (n - 2, n - 1)
                        } else if below {
                            (0, 0)
                        } else if above || i == n - 1 {
                            (n - 1, n - 1)
                        } else {
                            (i, i + 1)
                        };
                        if j0 == j1 || q == s[j0] {
                            out.push(Expect::Exact(x(j0, c)));
                        } else {
                            let w = (q - s[j0]) / (s[j1] - s[j0]);
                            let (a, b) = (x(j0, c), x(j1, c));
                            out.push(Expect::Linear {
                                value: a + w * (b - a),
                                scale: a.abs() + w.abs() * (a.abs() + b.abs()),
                            });
                        }
                    }
                    Method::Slerp { .. } => {
                        let (j0, j1, t) = if below {
                            (0, 0, 0.0)
                        } else if above || i == n - 1 {
                            (n - 1, n - 1, 0.0)
                        } else {
                            (i, i + 1, (q - s[i]) / (s[i + 1] - s[i]))
                        };
                        let quat = |j: usize| -> [f64; 4] { std::array::from_fn(|m| x(j, c + m)) };
                        for v in slerp_oracle(quat(j0), quat(j1), t) {
                            out.push(Expect::Slerp(v));
                        }
                        c += 4;
                        continue;
                    }
                }
                c += 1;
            }
        }
    }
    (out, valid)
}
