import http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";

const { constants } = http2;
const resetCodes: Record<number, Code> = {
  [constants.NGHTTP2_PROTOCOL_ERROR]: Code.Internal,
  [constants.NGHTTP2_INTERNAL_ERROR]: Code.Internal,
  [constants.NGHTTP2_FLOW_CONTROL_ERROR]: Code.Internal,
  [constants.NGHTTP2_SETTINGS_TIMEOUT]: Code.Internal,
  [constants.NGHTTP2_FRAME_SIZE_ERROR]: Code.Internal,
  [constants.NGHTTP2_COMPRESSION_ERROR]: Code.Internal,
  [constants.NGHTTP2_CONNECT_ERROR]: Code.Internal,
  [constants.NGHTTP2_REFUSED_STREAM]: Code.Unavailable,
  [constants.NGHTTP2_CANCEL]: Code.Canceled,
  [constants.NGHTTP2_ENHANCE_YOUR_CALM]: Code.ResourceExhausted,
  [constants.NGHTTP2_INADEQUATE_SECURITY]: Code.PermissionDenied,
  [constants.NGHTTP2_HTTP_1_1_REQUIRED]: Code.PermissionDenied,
};
const resetNames: Record<number, string> = {
  [constants.NGHTTP2_PROTOCOL_ERROR]: "PROTOCOL_ERROR",
  [constants.NGHTTP2_INTERNAL_ERROR]: "INTERNAL_ERROR",
  [constants.NGHTTP2_FLOW_CONTROL_ERROR]: "FLOW_CONTROL_ERROR",
  [constants.NGHTTP2_SETTINGS_TIMEOUT]: "SETTINGS_TIMEOUT",
  [constants.NGHTTP2_FRAME_SIZE_ERROR]: "FRAME_SIZE_ERROR",
  [constants.NGHTTP2_COMPRESSION_ERROR]: "COMPRESSION_ERROR",
  [constants.NGHTTP2_CONNECT_ERROR]: "CONNECT_ERROR",
  [constants.NGHTTP2_REFUSED_STREAM]: "REFUSED_STREAM",
  [constants.NGHTTP2_CANCEL]: "CANCEL",
  [constants.NGHTTP2_ENHANCE_YOUR_CALM]: "ENHANCE_YOUR_CALM",
  [constants.NGHTTP2_INADEQUATE_SECURITY]: "INADEQUATE_SECURITY",
  [constants.NGHTTP2_HTTP_1_1_REQUIRED]: "HTTP_1_1_REQUIRED",
};

/**
 * Why an HTTP/2 stream closed before its answer, as connect-node's
 * connectErrorFromH2ResetCode words it (client and server side alike);
 * undefined for codes that carry no meaning (NO_ERROR, STREAM_CLOSED).
 */
export function errorFromResetCode(rstCode: number | undefined): ConnectError | undefined {
  const code = rstCode === undefined ? undefined : resetCodes[rstCode];
  if (code === undefined) return undefined;
  return new ConnectError(`http/2 stream closed with error code ${resetNames[rstCode!]} (0x${rstCode!.toString(16)})`, code);
}
