//! The RPC's message encoding: postcard (serde) inside gRPC's length-prefixed frames.
//!
//! tonic reads each frame's 5-byte header and refuses a frame longer than the service's
//! decoding limit before buffering it (`rpc::MAX_MESSAGE_BYTES`), so a decoder only ever
//! sees a message that fits; postcard then decodes it without trusting any length inside
//! it for more than the bytes present (collections are grown as their items arrive, and
//! types with internal invariants are rebuilt and checked by their `TryFrom`, see
//! `basalt_core`'s `ops::wire`). Bytes that do not decode are refused with
//! `InvalidArgument`, never a panic.

use bytes::{Buf, BufMut};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::marker::PhantomData;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

/// A tonic codec encoding `E` and decoding `D` with postcard.
#[derive(Debug)]
pub struct PostcardCodec<E, D>(PhantomData<fn(E) -> D>);

impl<E, D> Default for PostcardCodec<E, D> {
    fn default() -> Self {
        PostcardCodec(PhantomData)
    }
}

impl<E, D> Codec for PostcardCodec<E, D>
where
    E: Serialize + Send + 'static,
    D: DeserializeOwned + Send + 'static,
{
    type Encode = E;
    type Decode = D;
    type Encoder = PostcardEncoder<E>;
    type Decoder = PostcardDecoder<D>;

    fn encoder(&mut self) -> Self::Encoder {
        PostcardEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        PostcardDecoder(PhantomData)
    }
}

/// Encodes one message with postcard.
#[derive(Debug)]
pub struct PostcardEncoder<E>(PhantomData<fn(E)>);

impl<E: Serialize> Encoder for PostcardEncoder<E> {
    type Item = E;
    type Error = Status;

    fn encode(&mut self, item: E, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        let bytes = postcard::to_allocvec(&item)
            .map_err(|e| Status::internal(format!("cannot encode a message: {e}")))?;
        dst.put_slice(&bytes);
        Ok(())
    }
}

/// Decodes one message with postcard.
#[derive(Debug)]
pub struct PostcardDecoder<D>(PhantomData<fn() -> D>);

impl<D: DeserializeOwned> Decoder for PostcardDecoder<D> {
    type Item = D;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<D>, Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        decode(&bytes).map(Some)
    }
}

/// Decodes a whole message, refusing trailing bytes.
pub(crate) fn decode<D: DeserializeOwned>(bytes: &[u8]) -> Result<D, Status> {
    match postcard::take_from_bytes::<D>(bytes) {
        Ok((value, [])) => Ok(value),
        Ok((_, rest)) => Err(Status::invalid_argument(format!(
            "malformed message: {} bytes after its end",
            rest.len()
        ))),
        Err(e) => Err(Status::invalid_argument(format!("malformed message: {e}"))),
    }
}
