//! Stage 4, comparison: from pairs to judged layers. Error statistics of one tensor pair
//! (`stats`), the tolerance each pair is judged by (`tolerance`, one tolerance's element bound in `bound`) in the precision its values
//! were computed in (`precision`), every pair compared and the first divergence found
//! (`evaluate`) into judged layers (`judged`), the outputs' own looser rule (`output_tolerance`), which rule a listed tolerance is (`tolerance_rule`) and what float32 rounding alone does to them (`rounding_reference`), layers whose values are
//! too small for the absolute tolerance to mean anything (`small_values`), discrete decisions
//! that flip under rounding (`discrete`) and selections that order equal values their own way
//! (`tied_selection`), what an isolation run feeds and what its results say about where each
//! error is made (`isolation`), the uncompared value several origins share
//! (`shared_producer`), and element-level detail for the layers a reader looks at
//! (`details`).

pub mod bound;
pub mod details;
pub mod discrete;
pub mod evaluate;
pub mod isolation;
pub mod judged;
pub mod output_tolerance;
pub mod precision;
pub mod rounding;
pub mod rounding_reference;
pub mod segment_ops;
pub mod shared_producer;
pub mod small_values;
pub mod sqnr_rule;
pub mod stats;
pub mod tied_selection;
pub mod tolerance;
pub mod tolerance_rule;
