// An unmodified AWS client through the proxy front door (SPEC §11, §13): it
// signs with the placeholder as its access key id (and any secret key);
// postern recognises the placeholder in the credential scope of its
// Authorization, drops the client's signature and the headers a signature
// sets, and signs again with the real key over the names the client signed.
// A presigned URL, and a payload signed chunk by chunk (aws-chunked with a
// signature per chunk), cannot be signed again: refused.
//
// Decisions where the SPEC is silent:
// - The region and service are the credential's (what the human approved);
//   a client scope naming others is refused rather than signed for them.
// - The client's x-amz-content-sha256 is kept when it is UNSIGNED-PAYLOAD or
//   STREAMING-UNSIGNED-PAYLOAD-TRAILER (no chunk is signed); a hex hash must
//   be the body's; absent, the body's hash is signed.
import { Refusal } from '../../../shared/errors';
import type { AwsSigV4Inject } from '../../../shared/credential';
import { sha256hex } from '../../../shared/crypto';
import { SIGV4_HEADERS, isPresigned, isStreamingPayload, parseClientAuthorization } from './aws-sigv4';

export interface AwsResign {
  signedHeaders: string[];
  payloadHash: string;
}

function refuse(message: string): never {
  throw new Refusal('bad_request', message);
}

// The Authorization header is this placeholder's slot.
export function isAwsSlot(name: string, value: string, placeholder: string): boolean {
  return name.toLowerCase() === 'authorization' && parseClientAuthorization(value)?.accessKeyId === placeholder;
}

export function refusePresigned(query: string): void {
  if (isPresigned(query))
    refuse(
      'a presigned URL (X-Amz-Signature in the query) cannot be signed again by postern; send the request with an Authorization header instead (the AWS CLI and SDKs do unless asked to presign)',
    );
}

// The client's headers without its signature, and what to sign again with.
export function resignAws(
  headers: [string, string][],
  slot: number,
  body: Buffer | null,
  scope: AwsSigV4Inject,
): { headers: [string, string][]; aws: AwsResign } {
  const client = parseClientAuthorization(headers[slot]![1])!;
  if (client.region !== scope.region || client.service !== scope.service)
    refuse(
      `the client signed for region "${client.region}" and service "${client.service}", but the credential signs for "${scope.region}" and "${scope.service}"; configure the client for that region and service`,
    );
  const sent = headers.filter(([n]) => n.toLowerCase() === 'x-amz-content-sha256').map(([, v]) => v.trim());
  if (sent.length > 1) refuse('header "x-amz-content-sha256" is given twice; send it once');
  const bodyHash = sha256hex(body ?? Buffer.alloc(0));
  let payloadHash = bodyHash;
  const given = sent[0];
  if (given !== undefined) {
    if (isStreamingPayload(given))
      refuse(
        `x-amz-content-sha256 "${given.slice(0, 64)}": a payload signed chunk by chunk (aws-chunked) cannot be signed again by postern; configure the client to send the body whole or unsigned`,
      );
    if (given === 'UNSIGNED-PAYLOAD' || given === 'STREAMING-UNSIGNED-PAYLOAD-TRAILER') payloadHash = given;
    else if (given.toLowerCase() !== bodyHash)
      refuse('header "x-amz-content-sha256" is not the SHA-256 of the body sent; send the body it was computed over');
  }
  const dropped = new Set(SIGV4_HEADERS);
  return {
    headers: headers.filter(([n], i) => i !== slot && !dropped.has(n.toLowerCase())),
    aws: { signedHeaders: client.signedHeaders, payloadHash },
  };
}
