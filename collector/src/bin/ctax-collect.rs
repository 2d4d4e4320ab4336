//! `ctax-collect`: see `ctax_collector::collect`.
use clap::Parser;

fn main() {
    let args = ctax_collector::collect::Args::parse();
    std::process::exit(ctax_collector::collect::main_with(args));
}
