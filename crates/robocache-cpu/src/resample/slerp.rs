//! Spherical linear interpolation of quaternions, in `f64`.

/// Slerp from `a` (at `t = 0`) to `b` (at `t = 1`).
///
/// Both inputs are normalised first; if their dot product is negative `b` is
/// negated (the shorter arc). The angle is `θ = 2·atan2(|a − b|, |a + b|)`,
/// accurate at every angle; below `1e-6` rad the result is the normalised
/// linear blend. The result is normalised, so it has unit norm (a zero input
/// quaternion gives NaN). The component order does not change the result:
/// every step treats the four components alike.
pub fn slerp(a: [f64; 4], b: [f64; 4], t: f64) -> [f64; 4] {
    let a = normalize(a);
    let mut b = normalize(b);
    if dot(a, b) < 0.0 {
        b = b.map(|v| -v);
    }
    if t == 0.0 {
        return a;
    }
    let difference = norm(std::array::from_fn(|k| a[k] - b[k]));
    let sum = norm(std::array::from_fn(|k| a[k] + b[k]));
    let theta = 2.0 * difference.atan2(sum);
    let blended: [f64; 4] = if theta < 1e-6 {
        std::array::from_fn(|k| a[k] + t * (b[k] - a[k]))
    } else {
        let sin_theta = theta.sin();
        let wa = ((1.0 - t) * theta).sin() / sin_theta;
        let wb = (t * theta).sin() / sin_theta;
        std::array::from_fn(|k| wa * a[k] + wb * b[k])
    };
    normalize(blended)
}

/// `q / |q|`.
pub fn normalize(q: [f64; 4]) -> [f64; 4] {
    let n = norm(q);
    q.map(|v| v / n)
}

fn dot(a: [f64; 4], b: [f64; 4]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
}

fn norm(q: [f64; 4]) -> f64 {
    dot(q, q).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halfway_about_z() {
        // 0 and 90 degrees about z (xyzw); halfway is 45 degrees.
        let a = [0.0, 0.0, 0.0, 1.0];
        let h = std::f64::consts::FRAC_PI_4;
        let b = [0.0, 0.0, h.sin(), h.cos()];
        let m = slerp(a, b, 0.5);
        let e = std::f64::consts::FRAC_PI_8;
        assert!((m[2] - e.sin()).abs() < 1e-15 && (m[3] - e.cos()).abs() < 1e-15);
    }

    #[test]
    fn takes_the_short_arc_and_tiny_angles() {
        let a = [0.0, 0.0, 0.0, 1.0];
        let b = [0.0, 0.0, 0.0, -1.0];
        assert_eq!(slerp(a, b, 0.7), a);
        let c = [1e-9, 0.0, 0.0, 1.0];
        let m = slerp(a, c, 0.5);
        assert!((m[0] - 5e-10).abs() < 1e-20);
    }
}
