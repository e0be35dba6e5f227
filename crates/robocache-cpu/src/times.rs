//! Timelines: explicit `f64` seconds (shared or per row) or uniform
//! (`start + i / hz`), their validation, and the search that places a target
//! time among the source samples.

use crate::{Error, Result};

/// The times of a stream's samples, or of the targets.
#[derive(Clone, Copy, Debug)]
pub enum Times<'a> {
    /// One timeline `[L]` shared by every row.
    Shared(&'a [f64]),
    /// One timeline per row, `[B, L]` row-major.
    PerRow(&'a [f64]),
    /// Uniform sampling shared by every row: sample `i` is at `start + i / hz`
    /// (computed in `f64` exactly so, on every backend).
    Uniform { start: f64, hz: f64 },
}

/// The shape of a timeline without its data: what validation needs when the
/// times live on a device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TimeShape {
    /// Shared times with this many elements.
    Shared(usize),
    /// Per-row times with this many elements in all.
    PerRow(usize),
    Uniform {
        start: f64,
        hz: f64,
    },
}

impl TimeShape {
    /// Checks that the timeline has the right length for `rows` rows of
    /// `len` samples each, and that a uniform timeline is well formed.
    pub fn check(&self, what: &str, rows: usize, len: usize) -> Result<()> {
        match *self {
            TimeShape::Shared(elements) => check_len(what, elements, &[len]),
            TimeShape::PerRow(elements) => check_len(what, elements, &[rows, len]),
            TimeShape::Uniform { start, hz } => {
                if start.is_finite() && hz.is_finite() && hz > 0.0 {
                    Ok(())
                } else {
                    Err(Error::BadUniformTimeline { what: what.to_owned(), start, hz })
                }
            }
        }
    }
}

/// Checks that the first `len` samples of a uniform timeline strictly
/// increase (they do unless `i / hz` is too small to change `start`).
pub fn check_uniform_increasing(what: &str, start: f64, hz: f64, len: usize) -> Result<()> {
    let times: Vec<f64> = (0..len).map(|i| uniform_time(start, hz, i)).collect();
    check_row_increasing(what, 0, &times)
}

impl Times<'_> {
    /// The shape of this timeline.
    pub fn shape(&self) -> TimeShape {
        match *self {
            Times::Shared(t) => TimeShape::Shared(t.len()),
            Times::PerRow(t) => TimeShape::PerRow(t.len()),
            Times::Uniform { start, hz } => TimeShape::Uniform { start, hz },
        }
    }

    /// The timeline of one row; `len` is the number of samples per row.
    #[inline]
    pub fn row(&self, row: usize, len: usize) -> RowTimes<'_> {
        match *self {
            Times::Shared(times) => RowTimes::Explicit(times),
            Times::PerRow(times) => RowTimes::Explicit(&times[row * len..(row + 1) * len]),
            Times::Uniform { start, hz } => RowTimes::Uniform { start, hz },
        }
    }

    /// Checks that the first `lengths(row)` times of every row are finite and
    /// strictly increasing (source times).
    pub(crate) fn check_increasing(
        &self,
        what: &str,
        rows: usize,
        len: usize,
        lengths: impl Fn(usize) -> usize,
    ) -> Result<()> {
        match *self {
            Times::Shared(times) => {
                let longest = (0..rows).map(&lengths).max().unwrap_or(0);
                check_row_increasing(what, 0, &times[..longest])
            }
            Times::PerRow(times) => (0..rows)
                .try_for_each(|row| check_row_increasing(what, row, &times[row * len..row * len + lengths(row)])),
            // Uniform times increase by construction once the rate is checked,
            // except where `i / hz` is too small to change `start`.
            Times::Uniform { start, hz } => {
                check_uniform_increasing(what, start, hz, (0..rows).map(&lengths).max().unwrap_or(0))
            }
        }
    }

    /// Checks that every time is finite (target times).
    pub(crate) fn check_finite(&self, what: &str, len: usize) -> Result<()> {
        let check = |row: usize, times: &[f64]| {
            times.iter().enumerate().try_for_each(|(index, &value)| {
                if value.is_finite() {
                    Ok(())
                } else {
                    Err(Error::NonFiniteTime { what: what.to_owned(), row, index, value })
                }
            })
        };
        match *self {
            Times::Shared(times) => check(0, times),
            Times::PerRow(times) => times.chunks(len.max(1)).enumerate().try_for_each(|(row, t)| check(row, t)),
            Times::Uniform { start, hz } => {
                let last = uniform_time(start, hz, len.saturating_sub(1));
                if last.is_finite() {
                    Ok(())
                } else {
                    Err(Error::NonFiniteTime { what: what.to_owned(), row: 0, index: len - 1, value: last })
                }
            }
        }
    }
}

fn check_len(what: &str, actual: usize, shape: &[usize]) -> Result<()> {
    let expected = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    match expected {
        Some(expected) if expected == actual => Ok(()),
        Some(expected) => Err(Error::ShapeMismatch { what: what.to_owned(), shape: shape.to_vec(), expected, actual }),
        None => Err(Error::Overflow(what.to_owned())),
    }
}

fn check_row_increasing(what: &str, row: usize, times: &[f64]) -> Result<()> {
    let mut previous = f64::NEG_INFINITY;
    for (index, &value) in times.iter().enumerate() {
        if !value.is_finite() {
            return Err(Error::NonFiniteTime { what: what.to_owned(), row, index, value });
        }
        if index > 0 && value <= previous {
            return Err(Error::TimesNotIncreasing { what: what.to_owned(), row, index, previous, value });
        }
        previous = value;
    }
    Ok(())
}

/// Sample `index` of a uniform timeline: `start + index / hz` in `f64`.
#[inline]
pub fn uniform_time(start: f64, hz: f64, index: usize) -> f64 {
    start + index as f64 / hz
}

/// The timeline of one row.
#[derive(Clone, Copy, Debug)]
pub enum RowTimes<'a> {
    /// Explicit times (at least the row's valid length of them).
    Explicit(&'a [f64]),
    /// `start + i / hz`.
    Uniform { start: f64, hz: f64 },
}

/// Where a target time falls among the valid samples `s_0 < … < s_{n-1}` of a row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Position {
    /// `q < s_0`.
    Below,
    /// `q > s_{n-1}`.
    Above,
    /// `s_index ≤ q`, and `q < s_{index+1}` or `index = n - 1` (then `q = s_{n-1}`).
    Inside { index: usize },
}

impl RowTimes<'_> {
    /// Time of sample `index`.
    #[inline]
    pub fn get(&self, index: usize) -> f64 {
        match *self {
            RowTimes::Explicit(times) => times[index],
            RowTimes::Uniform { start, hz } => uniform_time(start, hz, index),
        }
    }

    /// Places `q` among the first `n ≥ 1` samples.
    ///
    /// Never indexes past `n` even when the times are not increasing (the
    /// `trusted` option): the answer is then some index in range.
    #[inline]
    pub fn locate(&self, n: usize, q: f64) -> Position {
        // Number of samples with s_i <= q; the samples are sorted, so a
        // binary search (or, for a uniform timeline, a guess and fix-up).
        let count = match *self {
            RowTimes::Explicit(times) => times[..n].partition_point(|&s| s <= q),
            RowTimes::Uniform { start, hz } => uniform_count(start, hz, n, q),
        };
        if count == 0 {
            Position::Below
        } else if count == n && q > self.get(n - 1) {
            Position::Above
        } else {
            Position::Inside { index: count - 1 }
        }
    }
}

/// Number of `i < n` with `start + i / hz ≤ q`, by a guess from the rate and
/// an exact fix-up against the times as [`uniform_time`] computes them.
#[inline]
fn uniform_count(start: f64, hz: f64, n: usize, q: f64) -> usize {
    let guess = ((q - start) * hz).floor();
    // Clamp the guess into 0..=n (NaN goes to 0).
    let mut count = if guess >= 0.0 { (guess as usize).saturating_add(1).min(n) } else { 0 };
    while count < n && uniform_time(start, hz, count) <= q {
        count += 1;
    }
    while count > 0 && uniform_time(start, hz, count - 1) > q {
        count -= 1;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_explicit() {
        let t = RowTimes::Explicit(&[0.0, 1.0, 2.0]);
        assert_eq!(t.locate(3, -0.5), Position::Below);
        assert_eq!(t.locate(3, 0.0), Position::Inside { index: 0 });
        assert_eq!(t.locate(3, 1.5), Position::Inside { index: 1 });
        assert_eq!(t.locate(3, 2.0), Position::Inside { index: 2 });
        assert_eq!(t.locate(3, 2.5), Position::Above);
        // Only the first n samples count.
        assert_eq!(t.locate(2, 1.5), Position::Above);
        assert_eq!(t.locate(1, 0.0), Position::Inside { index: 0 });
    }

    #[test]
    fn locate_uniform_matches_explicit() {
        let (start, hz) = (1.7e9 + 0.123, 30.0);
        let explicit: Vec<f64> = (0..100).map(|i| uniform_time(start, hz, i)).collect();
        let uniform = RowTimes::Uniform { start, hz };
        let explicit_row = RowTimes::Explicit(&explicit);
        for k in -20i64..4000 {
            let q = start + k as f64 * 0.001;
            for n in [1, 2, 57, 100] {
                assert_eq!(uniform.locate(n, q), explicit_row.locate(n, q), "q={q} n={n}");
            }
            // Exactly on the samples too.
            let q = explicit[(k.rem_euclid(100)) as usize];
            assert_eq!(uniform.locate(100, q), explicit_row.locate(100, q));
        }
    }

    #[test]
    fn untrusted_garbage_stays_in_bounds() {
        let t = RowTimes::Explicit(&[5.0, 1.0, f64::NAN, 0.0]);
        for q in [-1.0, 0.5, 3.0, 10.0, f64::NAN] {
            match t.locate(4, q) {
                Position::Inside { index } => assert!(index < 4),
                Position::Below | Position::Above => {}
            }
        }
    }
}
