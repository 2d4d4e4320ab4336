//! What `verdicts.json` holds: one [`Verdict`] per hypothesis and success criterion. Serde
//! types only; the rules that fill them are in [`super::hypotheses`] and [`super::criteria`].

use serde::{Deserialize, Serialize};

use crate::analysis::model::Estimate;

/// Verdict vocabulary shared by hypotheses and success criteria.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    Supported,
    Refuted,
    /// The CI straddles the threshold.
    Inconclusive,
    /// A needed config or measurement is missing (reason says which).
    NotTestable,
}

impl VerdictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Supported => "supported",
            VerdictKind::Refuted => "refuted",
            VerdictKind::Inconclusive => "inconclusive",
            VerdictKind::NotTestable => "not testable",
        }
    }
}

/// One hypothesis (H1–H6) or success criterion (SC1–SC7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// `h1`…`h6`, `sc1`…`sc7` (also the report's HTML anchor).
    pub id: String,
    pub title: String,
    /// The claim as pre-registered in the seed.
    pub statement: String,
    pub estimate: Option<Estimate>,
    /// "fraction", "pp" (fraction points), "ratio", "hours", "count".
    pub unit: String,
    /// The falsifier threshold in words, e.g. "tax ≥ 0.10".
    pub threshold: String,
    pub verdict: VerdictKind,
    /// One line: why this verdict.
    pub reason: String,
    /// Extra label the seed defines (H3: framework-/implementation-cost-dominated; H4:
    /// additive / super-additive / sub-additive).
    pub label: Option<String>,
}

/// `verdicts.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdicts {
    pub schema_version: u32,
    pub simulated: bool,
    pub hypotheses: Vec<Verdict>,
    pub success_criteria: Vec<Verdict>,
    /// An A/A tax (a config against itself, launches split in two) excluded 0: every
    /// tax verdict's reason says so.
    #[serde(default)]
    pub unstable: bool,
    /// H1–H6 again without the launch-cells that slow episodes name (a sensitivity line; the
    /// verdicts above are the reported ones): [`super::sensitivity`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_episodes: Option<super::sensitivity::WithoutEpisodes>,
    /// H1–H6 at the next rate, without the Phase A cells of the configs that hold ref_safe
    /// down (a sensitivity line): [`super::sensitivity::without_holders`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_holders: Option<super::sensitivity::WithoutHolders>,
}

impl Verdicts {
    /// Every verdict, hypotheses first.
    pub fn all(&self) -> impl Iterator<Item = &Verdict> {
        self.hypotheses.iter().chain(&self.success_criteria)
    }

    /// The verdict with this id (`h1`, `sc6`, …).
    pub fn get(&self, id: &str) -> Option<&Verdict> {
        self.all().find(|v| v.id == id)
    }
}
