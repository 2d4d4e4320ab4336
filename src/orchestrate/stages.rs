//! Stage implementations.

use std::path::Path;

use ctax_schema::ReferenceRates;

use crate::analysis::{self, AnalyzeOptions};
use crate::fsutil::write_json_atomic;

/// Stage 2: reference rates from the Phase A data under `root` (the analysis engine's code),
/// written to `<root>/reference_rates.json`.
pub fn reference_rates(root: &Path) -> anyhow::Result<ReferenceRates> {
    let ds = crate::ingest::load(root)?;
    let opts = AnalyzeOptions {
        skip_itl: true,
        ..Default::default()
    };
    let (res, _) = analysis::analyze(&ds, &opts)?;
    let refs = res.summary.reference_rates;
    write_json_atomic(&root.join("reference_rates.json"), &refs)?;
    Ok(refs)
}
