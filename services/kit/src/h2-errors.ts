import http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";

const { constants } = http2;
/** RST_STREAM codes that mean something, with connect-node's Code and the name its messages use. */
const resetCodes: Record<number, [Code, string]> = {
  [constants.NGHTTP2_PROTOCOL_ERROR]: [Code.Internal, "PROTOCOL_ERROR"],
  [constants.NGHTTP2_INTERNAL_ERROR]: [Code.Internal, "INTERNAL_ERROR"],
  [constants.NGHTTP2_FLOW_CONTROL_ERROR]: [Code.Internal, "FLOW_CONTROL_ERROR"],
  [constants.NGHTTP2_SETTINGS_TIMEOUT]: [Code.Internal, "SETTINGS_TIMEOUT"],
  [constants.NGHTTP2_FRAME_SIZE_ERROR]: [Code.Internal, "FRAME_SIZE_ERROR"],
  [constants.NGHTTP2_COMPRESSION_ERROR]: [Code.Internal, "COMPRESSION_ERROR"],
  [constants.NGHTTP2_CONNECT_ERROR]: [Code.Internal, "CONNECT_ERROR"],
  [constants.NGHTTP2_REFUSED_STREAM]: [Code.Unavailable, "REFUSED_STREAM"],
  [constants.NGHTTP2_CANCEL]: [Code.Canceled, "CANCEL"],
  [constants.NGHTTP2_ENHANCE_YOUR_CALM]: [Code.ResourceExhausted, "ENHANCE_YOUR_CALM"],
  [constants.NGHTTP2_INADEQUATE_SECURITY]: [Code.PermissionDenied, "INADEQUATE_SECURITY"],
  [constants.NGHTTP2_HTTP_1_1_REQUIRED]: [Code.PermissionDenied, "HTTP_1_1_REQUIRED"],
};

/**
 * Why an HTTP/2 stream closed before its answer, as connect-node's
 * connectErrorFromH2ResetCode words it (client and server side alike);
 * undefined for codes that carry no meaning (NO_ERROR, STREAM_CLOSED).
 */
export function errorFromResetCode(rstCode: number | undefined): ConnectError | undefined {
  const known = rstCode === undefined ? undefined : resetCodes[rstCode];
  if (known === undefined) return undefined;
  const [code, name] = known;
  return new ConnectError(`http/2 stream closed with error code ${name} (0x${rstCode!.toString(16)})`, code);
}
