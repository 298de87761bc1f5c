//! The plan on a command line, as `pgapplianced run` and the benchmarks on
//! [`prepare`](super::prepare) take it (clap): a file given as the argument.

use std::path::PathBuf;

/// The plan: a file given as the argument (`--plan FILE` is still read, for units written
/// before).
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArg {
    /// The plan file (TOML).
    #[arg(value_name = "PLAN", required_unless_present = "plan_flag")]
    plan: Option<PathBuf>,
    /// The plan file, as a flag (same as the argument).
    #[arg(
        long = "plan",
        value_name = "PLAN",
        hide = true,
        conflicts_with = "plan"
    )]
    plan_flag: Option<PathBuf>,
}

impl PlanArg {
    /// The plan file, given as the argument or as `--plan`.
    pub fn path(&self) -> PathBuf {
        self.plan
            .clone()
            .or_else(|| self.plan_flag.clone())
            .expect("clap requires one of them")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        plan: PlanArg,
    }

    #[test]
    fn the_plan_is_the_argument_or_the_flag_never_both() {
        let arg = Cli::try_parse_from(["x", "a.toml"]).expect("argument");
        assert_eq!(arg.plan.path(), PathBuf::from("a.toml"));
        let flag = Cli::try_parse_from(["x", "--plan", "b.toml"]).expect("flag");
        assert_eq!(flag.plan.path(), PathBuf::from("b.toml"));
        assert!(Cli::try_parse_from(["x"]).is_err());
        assert!(Cli::try_parse_from(["x", "a.toml", "--plan", "b.toml"]).is_err());
    }
}
