//! Spherical linear interpolation of quaternions, in `f64`.

/// Slerp from `a` (at `t = 0`) to `b` (at `t = 1`).
///
/// Both inputs are normalised first; if their dot product is negative `b` is
/// negated (the shorter arc). The angle is `θ = 2·atan(|a − b| / |a + b|)`,
/// accurate at every angle; below `1e-6` rad the result is the normalised
/// linear blend. The result is normalised, so it has unit norm (a zero input
/// quaternion gives NaN). The component order does not change the result:
/// every step treats the four components alike.
///
/// `atan` and `sin` are [`atan_unit`] and [`sin_quarter`], not libm's: they
/// use only `+ − × ÷ √`, each rounded once, so the CUDA kernel computes the
/// same bits (libm and CUDA's math library differ in the last place).
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
    // After the flip the dot product is >= 0, so |a - b| <= |a + b| and the
    // ratio lies in [0, 1] (NaN for a zero quaternion, which propagates).
    let theta = 2.0 * atan_unit(difference / sum);
    let blended: [f64; 4] = if theta < 1e-6 {
        std::array::from_fn(|k| a[k] + t * (b[k] - a[k]))
    } else {
        // theta and both partial angles lie in [0, pi/2] for t in [0, 1].
        let sin_theta = sin_quarter(theta);
        let wa = sin_quarter((1.0 - t) * theta) / sin_theta;
        let wb = sin_quarter(t * theta) / sin_theta;
        std::array::from_fn(|k| wa * a[k] + wb * b[k])
    };
    normalize(blended)
}

/// Taylor coefficients of sin: (−1)^k / (2k+1)!.
const SIN: [f64; 12] = [
    1.0,
    -0.16666666666666666,
    0.008333333333333333,
    -0.0001984126984126984,
    2.7557319223985893e-06,
    -2.505210838544172e-08,
    1.6059043836821613e-10,
    -7.647163731819816e-13,
    2.8114572543455206e-15,
    -8.22063524662433e-18,
    1.9572941063391263e-20,
    -3.868170170630684e-23,
];

/// Taylor coefficients of atan: (−1)^k / (2k+1).
const ATAN: [f64; 13] = [
    1.0,
    -0.3333333333333333,
    0.2,
    -0.14285714285714285,
    0.1111111111111111,
    -0.09090909090909091,
    0.07692307692307693,
    -0.06666666666666667,
    0.058823529411764705,
    -0.05263157894736842,
    0.047619047619047616,
    -0.043478260869565216,
    0.04,
];

/// sin(x) for x in [0, π/2]: the Taylor series to x^23 by Horner's rule
/// (truncation below 1e-18), every operation rounded once. Within a few
/// ulps of the true value; the CUDA kernel evaluates the same expression.
pub fn sin_quarter(x: f64) -> f64 {
    let x2 = x * x;
    let mut p = SIN[11];
    for k in (0..11).rev() {
        p = p * x2 + SIN[k];
    }
    p * x
}

/// atan(r) for r in [0, 1]: above tan(π/8) by atan(r) = π/4 + atan((r − 1)/(r + 1)),
/// then one half-angle step v = u / (1 + √(1 + u²)) to |v| ≤ 0.2, then the
/// Taylor series to v^25 (truncation below 1e-18). Same bits on every backend.
pub fn atan_unit(r: f64) -> f64 {
    let (base, u) =
        if r > 0.41421356237309503 { (std::f64::consts::FRAC_PI_4, (r - 1.0) / (r + 1.0)) } else { (0.0, r) };
    let v = u / (1.0 + (1.0 + u * u).sqrt());
    let v2 = v * v;
    let mut p = ATAN[12];
    for k in (0..12).rev() {
        p = p * v2 + ATAN[k];
    }
    base + 2.0 * (p * v)
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
    fn portable_sin_and_atan_are_accurate() {
        for i in 0..=1000 {
            let x = std::f64::consts::FRAC_PI_2 * i as f64 / 1000.0;
            assert!((sin_quarter(x) - x.sin()).abs() <= 4.0 * f64::EPSILON, "sin {x}");
            let r = i as f64 / 1000.0;
            assert!((atan_unit(r) - r.atan()).abs() <= 4.0 * f64::EPSILON, "atan {r}");
        }
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
