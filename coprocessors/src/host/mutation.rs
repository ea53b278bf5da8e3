//! The host's per-mutation hooks (`pre_put`, `post_put`, `pre_delete`, `post_delete`),
//! which run on every write: each coprocessor's synchronous form (`pre_put_now` and the
//! like) first, so a chain whose hooks never wait answers at once, with no future
//! allocated. From the first coprocessor that needs its async form (it has no synchronous
//! one, or its synchronous one answered `None`), the rest of the chain runs as one boxed
//! future.
//!
//! Invariants kept: the chain runs in order and each coprocessor is called once per
//! operation (its synchronous form, then its async form only if the synchronous one
//! answered `None`), counted once; failures are settled as for every other hook (see the
//! `host` module doc); a pre-hook's bypass ends the chain, a post-hook's is a fault.

use super::{CoprocessorHost, Hook};
use crate::observer::ObserverContext;
use basalt_core::client::{Delete, Put};
use basalt_core::coprocessor::{Flow, HookEnv, HookFuture};
use basalt_core::Result;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The synchronous walk both chains share: for each coprocessor that runs the hook, its
/// synchronous form's answer (`$out`, with its context `$ctx`) goes to `$answer`; from the
/// first coprocessor that needs its async form, the rest of the chain is returned boxed
/// (`$rest`), with the call already counted when its synchronous form answered `None`.
macro_rules! sync_walk {
    (
        $self:ident, $a:lifetime, $env:ident, $m:ident, $hook:expr, $now_hook:expr, $now:ident,
        $rest:ident, |$cp:ident, $ctx:ident, $out:ident| $answer:block
    ) => {
        for (i, $cp) in $self.chain.iter().enumerate() {
            if !$cp.runs($hook) || $cp.unloaded.load(Ordering::Acquire) {
                continue;
            }
            if !$cp.runs($now_hook) {
                return HookFuture::Waiting(Box::pin($self.$rest(i, None, $env, $m)));
            }
            let mut $ctx = ObserverContext::new($env, &$cp.name);
            let sampled = $cp.start_call();
            let now = |c: &mut ObserverContext<$a>| $cp.observer.$now(c, $m);
            let Some($out) = $self.guarded_now($cp, $now_hook, sampled, &mut $ctx, now) else {
                let tried = Some(sampled);
                return HookFuture::Waiting(Box::pin($self.$rest(i, tried, $env, $m)));
            };
            $answer
        }
    };
}

/// Generates a pre-hook's chain (`$chain`, answering at once while every coprocessor
/// answers synchronously) and its async remainder (`$rest`).
macro_rules! pre_hook {
    ($chain:ident, $rest:ident, $ty:ty, $hook:expr, $now_hook:expr, $now:ident, $later:ident) => {
        /// The chain of this pre-hook: synchronous forms at once, the rest boxed.
        pub(super) fn $chain<'a>(
            &'a self,
            env: &'a HookEnv<'a>,
            m: &'a mut $ty,
        ) -> HookFuture<'a, Flow> {
            sync_walk!(self, 'a, env, m, $hook, $now_hook, $now, $rest, |cp, ctx, out| {
                match out {
                    Ok(()) if ctx.is_bypassed() => return HookFuture::Ready(Ok(Flow::Bypass)),
                    Ok(()) => {}
                    Err(f) => {
                        if let Err(e) = self.settle(cp, f) {
                            return HookFuture::Ready(Err(e));
                        }
                    }
                }
            });
            HookFuture::Ready(Ok(Flow::Continue))
        }

        /// The chain of this pre-hook from `start` on, waiting where hooks wait. `tried`
        /// is the start of a call of `start`'s coprocessor whose synchronous form answered
        /// `None`: its async form runs next.
        async fn $rest<'a>(
            &'a self,
            start: usize,
            mut tried: Option<Option<Instant>>,
            env: &'a HookEnv<'a>,
            m: &'a mut $ty,
        ) -> Result<Flow> {
            for cp in self.chain.iter().skip(start) {
                let out = match tried.take() {
                    Some(sampled) => {
                        let mut ctx = ObserverContext::new(env, &cp.name);
                        let out =
                            Self::guarded_from(cp, sampled, cp.observer.$later(&mut ctx, m)).await;
                        self.learn_async(cp, $hook, $now_hook, &ctx);
                        out.map(|()| ctx.is_bypassed())
                    }
                    None if !cp.runs($hook) || cp.unloaded.load(Ordering::Acquire) => continue,
                    None => {
                        let mut ctx = ObserverContext::new(env, &cp.name);
                        let sampled = cp.start_call();
                        let now = |c: &mut ObserverContext<'a>| cp.observer.$now(c, m);
                        let out = match self.guarded_now(cp, $now_hook, sampled, &mut ctx, now) {
                            Some(out) => out,
                            None => {
                                let later = cp.observer.$later(&mut ctx, m);
                                let out = Self::guarded_from(cp, sampled, later).await;
                                self.learn_async(cp, $hook, $now_hook, &ctx);
                                out
                            }
                        };
                        out.map(|()| ctx.is_bypassed())
                    }
                };
                match out {
                    Ok(true) => return Ok(Flow::Bypass),
                    Ok(false) => {}
                    Err(f) => self.settle(cp, f)?,
                }
            }
            Ok(Flow::Continue)
        }
    };
}

/// Generates a post-hook's chain and its async remainder, as [`pre_hook`] does; a bypass
/// in a post-hook is a fault.
macro_rules! post_hook {
    ($chain:ident, $rest:ident, $ty:ty, $hook:expr, $now_hook:expr, $now:ident, $later:ident, $name:literal) => {
        /// The chain of this post-hook: synchronous forms at once, the rest boxed.
        pub(super) fn $chain<'a>(&'a self, env: &'a HookEnv<'a>, m: &'a $ty) -> HookFuture<'a, ()> {
            sync_walk!(self, 'a, env, m, $hook, $now_hook, $now, $rest, |cp, ctx, out| {
                if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, $name)) {
                    if let Err(e) = self.settle(cp, f) {
                        return HookFuture::Ready(Err(e));
                    }
                }
            });
            HookFuture::Ready(Ok(()))
        }

        /// The chain of this post-hook from `start` on (see the pre-hooks' remainder).
        async fn $rest<'a>(
            &'a self,
            start: usize,
            mut tried: Option<Option<Instant>>,
            env: &'a HookEnv<'a>,
            m: &'a $ty,
        ) -> Result<()> {
            for cp in self.chain.iter().skip(start) {
                let mut ctx = ObserverContext::new(env, &cp.name);
                let out = match tried.take() {
                    Some(sampled) => {
                        Self::guarded_from(cp, sampled, cp.observer.$later(&mut ctx, m)).await
                    }
                    None if !cp.runs($hook) || cp.unloaded.load(Ordering::Acquire) => continue,
                    None => {
                        let sampled = cp.start_call();
                        let now = |c: &mut ObserverContext<'a>| cp.observer.$now(c, m);
                        match self.guarded_now(cp, $now_hook, sampled, &mut ctx, now) {
                            Some(out) => out,
                            None => {
                                let later = cp.observer.$later(&mut ctx, m);
                                Self::guarded_from(cp, sampled, later).await
                            }
                        }
                    }
                };
                self.learn_async(cp, $hook, $now_hook, &ctx);
                if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, $name)) {
                    self.settle(cp, f)?;
                }
            }
            Ok(())
        }
    };
}

impl CoprocessorHost {
    pre_hook!(
        pre_put_chain,
        pre_put_rest,
        Put,
        Hook::PrePut,
        Hook::PrePutNow,
        pre_put_now,
        pre_put
    );
    pre_hook!(
        pre_delete_chain,
        pre_delete_rest,
        Delete,
        Hook::PreDelete,
        Hook::PreDeleteNow,
        pre_delete_now,
        pre_delete
    );
    post_hook!(
        post_put_chain,
        post_put_rest,
        Put,
        Hook::PostPut,
        Hook::PostPutNow,
        post_put_now,
        post_put,
        "post_put"
    );
    post_hook!(
        post_delete_chain,
        post_delete_rest,
        Delete,
        Hook::PostDelete,
        Hook::PostDeleteNow,
        post_delete_now,
        post_delete,
        "post_delete"
    );
}
