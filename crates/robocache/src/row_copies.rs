//! Blocks of rows copied between tensors together: a mixture batch's
//! parts into its padded outputs, in one kernel launch on a GPU
//! (`copy_row_blocks`), one copy after another on the CPU.

use crate::backend::operations::CudaOperations;
use crate::{Device, Error, Result, Tensor};

/// Every copy of `copies` ([`Tensor::copy_row_range_into`] each, into
/// `dests[copy.to]`): on a GPU all in one kernel launch (host data put on
/// the device first), on the CPU one after the other. No two copies may
/// write the same elements.
pub(crate) fn copy_rows_together(device: &Device, copies: &[RowsCopy<'_>], dests: &mut [Tensor]) -> Result<()> {
    let missing = |to: usize| Error::Internal(format!("copy_rows_together: no destination {to}"));
    let Device::Cuda(cuda) = device else {
        for copy in copies {
            let to = dests.get_mut(copy.to).ok_or_else(|| missing(copy.to))?;
            copy.from.copy_row_range_into(
                copy.source_rows(),
                to,
                copy.width,
                copy.dest_width,
                copy.row,
                copy.column,
            )?;
        }
        return Ok(());
    };
    // Sources on the host (a padding mask's rows) are put on the device
    // first, each once however many copies read it.
    let mut uploads: Vec<(*const Tensor, Tensor)> = Vec::new();
    for copy in copies {
        let source: *const Tensor = copy.from;
        if copy.from.device_pointer().is_none() && !uploads.iter().any(|(at, _)| std::ptr::eq(*at, source)) {
            uploads.push((source, Tensor::from_host_vec(device, copy.from.to_host()?, copy.from.shape())?));
        }
    }
    let uploaded: Vec<Option<&Tensor>> = copies
        .iter()
        .map(|copy| uploads.iter().find(|(at, _)| std::ptr::eq(*at, copy.from)).map(|(_, tensor)| tensor))
        .collect();
    let mut blocks = Vec::with_capacity(copies.len());
    for (copy, &uploaded) in copies.iter().zip(&uploaded) {
        let from = uploaded.unwrap_or(copy.from);
        let to = dests.get(copy.to).ok_or_else(|| missing(copy.to))?;
        if to.device_pointer().is_none() {
            return Err(Error::Layout { what: "copy_rows_together".into(), reason: "into host memory".into() });
        }
        let block = from.row_block(copy.source_rows(), to, copy.width, copy.dest_width, copy.row, copy.column)?;
        blocks.push((from, to, block));
    }
    CudaOperations::copy_row_blocks(cuda, device, &blocks)
}

/// One copy of [`copy_rows_together`]: rows `from_row..from_row + rows`
/// of `from`, seen as rows of `width` elements (every row: `rows` is
/// `None`), into destination `to`, rows of `dest_width`, from row `row`
/// and column `column`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowsCopy<'a> {
    pub from: &'a Tensor,
    pub from_row: usize,
    pub rows: Option<usize>,
    pub to: usize,
    pub width: usize,
    pub dest_width: usize,
    pub row: usize,
    pub column: usize,
}

impl RowsCopy<'_> {
    /// The source's rows it copies.
    fn source_rows(&self) -> std::ops::Range<usize> {
        let all = self.from.len().checked_div(self.width).unwrap_or(0);
        self.from_row..self.rows.map_or(all, |rows| self.from_row + rows)
    }
}
