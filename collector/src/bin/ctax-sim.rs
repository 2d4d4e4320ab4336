//! `ctax-sim`: see `ctax_collector::sim`. Everything it produces is SIMULATED.
use clap::Parser;

fn main() {
    let args = ctax_collector::sim::SimArgs::parse();
    if let Err(e) = ctax_collector::sim::main_with(args) {
        eprintln!("ctax-sim: error: {e:#}");
        std::process::exit(1);
    }
}
