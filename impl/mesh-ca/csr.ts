/**
 * What the mesh CA accepts as a certificate signing request (PKCS #10, RFC 2986, PEM): exactly
 * one request of bounded size whose only subject alternative name is the one URI SAN it was
 * asked for, with an ECDSA P-256/P-384 or RSA (>= 2048 bits) key, signed by that key.
 *
 * Stricter than istiod, which signs the identities it decides on whatever SANs the CSR lists:
 * here a CSR that asks for more, or for something else, is refused with a reason, so a client
 * bug or a probe for a wider certificate shows in the CA's log instead of being papered over.
 *
 * The signature check needs a crypto implementation: it comes in as `verifySignature` (the
 * CA's adapter passes WebCrypto's), which keeps this module free of I/O and randomness.
 */
import 'reflect-metadata'; // @peculiar/x509 -> tsyringe needs the Reflect metadata polyfill
import * as x509 from '@peculiar/x509';

/** Largest CSR accepted, PEM text (a P-256 CSR with one SAN is about 500 bytes; RSA 4096 about 1.8 KB). */
export const MAX_CSR_BYTES = 8 * 1024;

const SAN_OID = '2.5.29.17';
const BEGIN = '-----BEGIN CERTIFICATE REQUEST-----';
const END = '-----END CERTIFICATE REQUEST-----';

type CsrResult =
  | { readonly ok: true; readonly request: x509.Pkcs10CertificateRequest }
  | { readonly ok: false; readonly reason: string };

const refuse = (reason: string): CsrResult => ({ ok: false, reason });

export async function checkCsr(
  pem: string,
  identity: string,
  verifySignature: (request: x509.Pkcs10CertificateRequest) => Promise<boolean>,
): Promise<CsrResult> {
  if (pem.length > MAX_CSR_BYTES) return refuse(`the CSR is ${pem.length} bytes, more than ${MAX_CSR_BYTES}`);
  const text = pem.trim();
  if (!text.startsWith(BEGIN) || !text.endsWith(END) || text.indexOf(BEGIN, 1) !== -1)
    return refuse('the CSR is not exactly one PEM block "CERTIFICATE REQUEST"');
  const body = text.slice(BEGIN.length, text.length - END.length).replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(body)) return refuse('the CSR PEM block is not base64');
  // The library parses lazily: the key, the attributes and the extensions are read on first use,
  // so every read of a field is inside the same guard as the constructor.
  let request: x509.Pkcs10CertificateRequest;
  let key: { name?: string; namedCurve?: string; modulusLength?: number };
  let sanExtensions: x509.Extension[];
  try {
    request = new x509.Pkcs10CertificateRequest(Buffer.from(body, 'base64'));
    key = request.publicKey.algorithm as typeof key;
    sanExtensions = request.extensions.filter((e) => e.type === SAN_OID);
  } catch (e) {
    return refuse(`the CSR is not a PKCS #10 request: ${e instanceof Error ? e.message : String(e)}`);
  }
  const keyOk =
    (key.name === 'ECDSA' && (key.namedCurve === 'P-256' || key.namedCurve === 'P-384')) ||
    ((key.name === 'RSASSA-PKCS1-v1_5' || key.name === 'RSA-PSS') && (key.modulusLength ?? 0) >= 2048);
  if (!keyOk)
    return refuse(
      `the CSR's key is ${key.name ?? 'of an unknown algorithm'}${key.namedCurve ? ` ${key.namedCurve}` : ''}${key.modulusLength ? ` ${key.modulusLength} bits` : ''}; accepted: ECDSA P-256 or P-384, RSA of 2048 bits or more`,
    );
  if (sanExtensions.length !== 1)
    return refuse(`the CSR has ${sanExtensions.length} subject alternative name extensions, not one`);
  let names: { type: string; value: string }[];
  try {
    names = new x509.SubjectAlternativeNameExtension(sanExtensions[0]!.rawData).names.toJSON();
  } catch (e) {
    return refuse(`the CSR's subject alternative names cannot be read: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (names.length !== 1 || names[0]!.type !== 'url' || names[0]!.value !== identity)
    return refuse(
      `the CSR names ${names.map((n) => `${n.type}:${n.value}`).join(', ') || 'nothing'}; it may name only url:${identity}`,
    );
  let signed: boolean;
  try {
    signed = await verifySignature(request);
  } catch (e) {
    return refuse(`the CSR's signature cannot be checked: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!signed) return refuse("the CSR's signature does not verify with its own key");
  return { ok: true, request };
}
