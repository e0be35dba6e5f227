//! Blocks of rows copied between tensors together: a mixture batch's
//! parts into its padded outputs, in one kernel launch on a GPU
//! (`copy_row_blocks`), one copy after another on the CPU.

use crate::backend::operations::CudaOperations;
use crate::{Device, Error, Result, Tensor};

/// Every copy of `copies` ([`Tensor::copy_rows_into`] each, into
/// `dests[copy.to]`): on a GPU all in one kernel launch (host data put on
/// the device first), on the CPU one after the other. No two copies may
/// write the same elements.
pub(crate) fn copy_rows_together(device: &Device, copies: &[RowsCopy<'_>], dests: &mut [Tensor]) -> Result<()> {
    let missing = |to: usize| Error::Internal(format!("copy_rows_together: no destination {to}"));
    let Device::Cuda(cuda) = device else {
        for copy in copies {
            let to = dests.get_mut(copy.to).ok_or_else(|| missing(copy.to))?;
            copy.from.copy_rows_into(to, copy.width, copy.dest_width, copy.row, copy.column)?;
        }
        return Ok(());
    };
    // Sources on the host (a constant's rows) are put on the device first.
    let uploaded: Vec<Option<Tensor>> = copies
        .iter()
        .map(|copy| match copy.from.device_pointer() {
            Some(_) => Ok(None),
            None => Tensor::from_host_vec(device, copy.from.to_host()?, copy.from.shape()).map(Some),
        })
        .collect::<Result<_>>()?;
    let mut blocks = Vec::with_capacity(copies.len());
    for (copy, uploaded) in copies.iter().zip(&uploaded) {
        let from = uploaded.as_ref().unwrap_or(copy.from);
        let to = dests.get(copy.to).ok_or_else(|| missing(copy.to))?;
        if to.device_pointer().is_none() {
            return Err(Error::Layout { what: "copy_rows_together".into(), reason: "into host memory".into() });
        }
        blocks.push((from, to, from.row_block(to, copy.width, copy.dest_width, copy.row, copy.column)?));
    }
    CudaOperations::copy_row_blocks(cuda, device, &blocks)
}

/// One copy of [`copy_rows_together`]: `from` as rows of `width`
/// elements into destination `to`, rows of `dest_width`, from row `row` and
/// column `column`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowsCopy<'a> {
    pub from: &'a Tensor,
    pub to: usize,
    pub width: usize,
    pub dest_width: usize,
    pub row: usize,
    pub column: usize,
}
