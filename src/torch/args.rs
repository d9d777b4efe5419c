//! Encoding forward's arguments for the shim: a prefix walk of each `ArgValue` into flat
//! arrays (codes, floats, strings, tensors) that C++ reads back into IValues of the types
//! forward's schema declares (see `AcArgs` in ac_args.h for the codes).

use super::convert::from_host;
use crate::signature::types::ArgValue;
use anyhow::{anyhow, Result};
use std::ffi::CString;

/// The arrays one call of the shim reads its arguments from; they must outlive the call.
#[derive(Default)]
pub struct EncodedArgs {
    pub codes: Vec<i64>,
    pub floats: Vec<f64>,
    pub strings: Vec<CString>,
    pub tensors: Vec<tch::Tensor>,
}

impl EncodedArgs {
    pub fn new(values: &[ArgValue]) -> Result<EncodedArgs> {
        let mut out = EncodedArgs::default();
        for v in values {
            out.push(v)?;
        }
        Ok(out)
    }

    fn text(&mut self, s: &str) -> Result<()> {
        let c = CString::new(s).map_err(|_| anyhow!("argument text {s:?} holds a NUL byte"))?;
        self.strings.push(c);
        Ok(())
    }

    fn push(&mut self, v: &ArgValue) -> Result<()> {
        match v {
            ArgValue::Tensor(t) => {
                self.codes.push(0);
                self.tensors.push(from_host(t)?);
            }
            ArgValue::Int(i) => self.codes.extend([1, *i]),
            ArgValue::Float(f) => {
                self.codes.push(2);
                self.floats.push(*f);
            }
            ArgValue::Bool(b) => self.codes.extend([3, i64::from(*b)]),
            ArgValue::Str(s) => {
                self.codes.push(4);
                self.text(s)?;
            }
            ArgValue::None => self.codes.push(5),
            ArgValue::Default => self.codes.push(6),
            ArgValue::Tuple(e) | ArgValue::List(e) => {
                let code = if matches!(v, ArgValue::Tuple(_)) {
                    7
                } else {
                    8
                };
                self.codes.extend([code, e.len() as i64]);
                for x in e {
                    self.push(x)?;
                }
            }
            ArgValue::Dict(e) => {
                self.codes.extend([9, e.len() as i64]);
                for (k, x) in e {
                    self.text(k)?;
                    self.push(x)?;
                }
            }
        }
        Ok(())
    }
}
