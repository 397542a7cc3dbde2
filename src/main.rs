//! The `dlbench` binary: everything lives in the library; see `dlbench::cli`.

fn main() {
    std::process::exit(dlbench::cli::main());
}
