//! The `dlbench` binary: everything lives in the library; see `dlbench::cli`.

fn main() {
    dlbench::usage::tune_allocator();
    std::process::exit(dlbench::cli::main());
}
