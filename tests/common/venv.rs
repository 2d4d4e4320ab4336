//! The python of the CPU vLLM venv (`CTAX_VLLM_VENV`, which `bash tools/setup.sh` prepares:
//! numpy, pyarrow), for the tests that check the tool's output with Python's libraries.
//! Included with `#[path = "common/venv.rs"] mod venv;` (not through `common`, whose report
//! fixtures these tests do not need).

use std::path::PathBuf;

/// `$CTAX_VLLM_VENV/bin/python`; without the variable, a panic under `CTAX_REQUIRE_VLLM=1`
/// (test_all, CI) and otherwise `None` after a loud line naming the check skipped (`what`) and
/// the library it needs (`needs`).
pub fn python(what: &str, needs: &str) -> Option<PathBuf> {
    let Some(venv) = std::env::var_os("CTAX_VLLM_VENV") else {
        if std::env::var("CTAX_REQUIRE_VLLM").as_deref() == Ok("1") {
            panic!("CTAX_REQUIRE_VLLM=1 but CTAX_VLLM_VENV (python with {needs}) is not set");
        }
        eprintln!("\n*** SKIPPED {what}: set CTAX_VLLM_VENV (bash tools/setup.sh) ***\n");
        return None;
    };
    Some(PathBuf::from(venv).join("bin/python"))
}
