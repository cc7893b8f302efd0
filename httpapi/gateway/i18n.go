package gateway

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// The gateway's message catalogue: every client-facing error message, in
// each supported language. Handlers name a message by its msgID; nothing
// else in the gateway writes message text.

// msgID names one catalogue entry; its text may hold fmt verbs.
type msgID string

// Catalogue entries.
const (
	msgTokenMissing     msgID = "token_missing"
	msgTokenInvalid     msgID = "token_invalid"
	msgWebhookAuth      msgID = "webhook_auth"
	msgWebhookBusy      msgID = "webhook_busy"
	msgToolFailed       msgID = "tool_failed"
	msgScopeDenied      msgID = "scope_denied"
	msgOwnerOnly        msgID = "owner_only"
	msgUserRequired     msgID = "user_required"
	msgUserBinding      msgID = "user_binding"
	msgWSConnectFirst   msgID = "ws_connect_first"
	msgTooManyConns     msgID = "too_many_conns"
	msgUserFileOnly     msgID = "user_file_only"
	msgAborted          msgID = "aborted"
	msgOpenMode         msgID = "open_mode"
	msgBadHeader        msgID = "bad_header"
	msgRateLimited      msgID = "rate_limited"
	msgRouteNotFound    msgID = "route_not_found"
	msgNoSuchMethod     msgID = "no_such_method"
	msgMethodNotAllowed msgID = "method_not_allowed"
	msgAgentNotFound    msgID = "agent_not_found"
	msgProviderNotFound msgID = "provider_not_found"
	msgKeyNotFound      msgID = "key_not_found"
	msgTraceNotFound    msgID = "trace_not_found"
	msgNotFound         msgID = "not_found"
	msgExists           msgID = "exists"
	msgAgentExists      msgID = "agent_exists"
	msgProviderExists   msgID = "provider_exists"
	msgInvalid          msgID = "invalid"
	msgQuota            msgID = "quota"
	msgInvalidJSON      msgID = "invalid_json"
	msgTooLarge         msgID = "too_large"
	msgInUse            msgID = "in_use"
	msgAgentDisabled    msgID = "agent_disabled"
	msgProviderDisabled msgID = "provider_disabled"
	msgAgentTimeout     msgID = "agent_timeout"
	msgProviderFailed   msgID = "provider_failed"
	msgUpstreamFailed   msgID = "upstream_failed"
	msgUnavailable      msgID = "unavailable"
	msgBlobUnavailable  msgID = "blob_unavailable"
	msgMCPStarting      msgID = "mcp_starting"
	msgInternal         msgID = "internal"
)

// Supported languages, in catalogue column order.
const (
	langEN = iota
	langVI
	langZH
)

var langTags = [...]string{langEN: "en", langVI: "vi", langZH: "zh"}

// catalogue holds {en, vi, zh} for every msgID.
var catalogue = map[msgID][3]string{
	msgTokenMissing:     {"missing bearer token: send Authorization: Bearer <token>", "thiếu mã xác thực: hãy gửi Authorization: Bearer <token>", "缺少令牌：请发送 Authorization: Bearer <token>"},
	msgTokenInvalid:     {"invalid, revoked or expired token", "mã xác thực không hợp lệ, đã bị thu hồi hoặc đã hết hạn", "令牌无效、已吊销或已过期"},
	msgToolFailed:       {"tool %s failed: %s", "công cụ %s thất bại: %s", "工具 %s 执行失败：%s"},
	msgWebhookAuth:      {"bad or replayed webhook signature, or a timestamp more than 5 minutes off", "chữ ký webhook sai hoặc bị gửi lại, hoặc dấu thời gian lệch quá 5 phút", "Webhook 签名错误或被重放，或时间戳偏差超过 5 分钟"},
	msgWebhookBusy:      {"too many async messages in flight for this channel instance (gateway.webhook_max_in_flight); retry later", "quá nhiều tin nhắn bất đồng bộ đang xử lý cho kênh này (gateway.webhook_max_in_flight); vui lòng thử lại sau", "此渠道实例正在处理的异步消息过多（gateway.webhook_max_in_flight）；请稍后重试"},
	msgScopeDenied:      {"this credential lacks the %s scope", "thông tin xác thực này thiếu quyền %s", "此凭据缺少 %s 权限"},
	msgOwnerOnly:        {"only the agent's owner may do this", "chỉ chủ sở hữu agent mới được thực hiện thao tác này", "只有智能体的所有者可以执行此操作"},
	msgUserRequired:     {"header X-Gateway-User-Id is required", "cần có header X-Gateway-User-Id", "需要请求头 X-Gateway-User-Id"},
	msgUserBinding:      {"this API key acts only for the user it was created for", "API key này chỉ được hành động thay cho người dùng mà nó được tạo ra", "此 API 密钥只能代表其创建时绑定的用户"},
	msgWSConnectFirst:   {"the first request must be connect {token}", "yêu cầu đầu tiên phải là connect {token}", "第一个请求必须是 connect {token}"},
	msgTooManyConns:     {"too many open connections for this credential", "quá nhiều kết nối đang mở cho thông tin xác thực này", "此凭据打开的连接过多"},
	msgUserFileOnly:     {"only USER.md can be updated, and only by its user", "chỉ USER.md được cập nhật, và chỉ bởi chính người dùng đó", "只能更新 USER.md，且只能由其用户本人更新"},
	msgAborted:          {"the run was aborted", "lượt chạy đã bị hủy", "运行已被中止"},
	msgOpenMode:         {"without a gateway token only this machine may call the gateway: %s refused", "khi không có gateway token, chỉ máy này mới được gọi gateway: %s bị từ chối", "未设置网关令牌时只有本机可以调用网关：拒绝 %s"},
	msgBadHeader:        {"header %s is invalid", "header %s không hợp lệ", "请求头 %s 无效"},
	msgRateLimited:      {"rate limit exceeded, retry later", "vượt quá giới hạn tần suất, vui lòng thử lại sau", "超出速率限制，请稍后重试"},
	msgRouteNotFound:    {"no such endpoint", "không có endpoint này", "没有此端点"},
	msgNoSuchMethod:     {"no such method", "không có phương thức này", "没有此方法"},
	msgMethodNotAllowed: {"method not allowed on this endpoint", "phương thức không được phép trên endpoint này", "此端点不允许该方法"},
	msgAgentNotFound:    {"agent not found", "không tìm thấy agent", "未找到智能体"},
	msgProviderNotFound: {"provider not found", "không tìm thấy nhà cung cấp", "未找到提供商"},
	msgKeyNotFound:      {"API key not found", "không tìm thấy API key", "未找到 API 密钥"},
	msgTraceNotFound:    {"trace not found", "không tìm thấy trace", "未找到追踪记录"},
	msgNotFound:         {"resource not found", "không tìm thấy tài nguyên", "未找到资源"},
	msgExists:           {"already exists: %s", "đã tồn tại: %s", "已存在：%s"},
	msgAgentExists:      {"an agent with this agent_key already exists", "đã có agent với agent_key này", "已存在使用此 agent_key 的智能体"},
	msgProviderExists:   {"a provider with this name already exists", "đã có nhà cung cấp với tên này", "已存在同名提供商"},
	msgInvalid:          {"invalid request: %s", "yêu cầu không hợp lệ: %s", "请求无效：%s"},
	msgQuota:            {"quota reached: %s", "đã đạt hạn mức: %s", "已达配额：%s"},
	msgInvalidJSON:      {"request body is not valid JSON: %s", "nội dung yêu cầu không phải JSON hợp lệ: %s", "请求体不是有效的 JSON：%s"},
	msgTooLarge:         {"request body too large", "nội dung yêu cầu quá lớn", "请求体过大"},
	msgInUse:            {"precondition failed: %s", "điều kiện tiên quyết không thỏa: %s", "前置条件不满足：%s"},
	msgAgentDisabled:    {"the agent is disabled", "agent đang bị vô hiệu hóa", "该智能体已停用"},
	msgProviderDisabled: {"the agent's provider is disabled", "nhà cung cấp của agent đang bị vô hiệu hóa", "该智能体的提供商已停用"},
	msgAgentTimeout:     {"the agent did not finish within its time limit of %d s", "agent không hoàn thành trong giới hạn thời gian %d giây", "智能体未在 %d 秒的时限内完成"},
	msgProviderFailed:   {"the agent's provider failed: %s", "nhà cung cấp của agent gặp lỗi: %s", "智能体的提供商出错：%s"},
	msgUpstreamFailed:   {"the provider failed: %s", "nhà cung cấp gặp lỗi: %s", "提供商出错：%s"},
	msgUnavailable:      {"service temporarily unavailable", "dịch vụ tạm thời không khả dụng", "服务暂时不可用"},
	msgBlobUnavailable:  {"file storage unavailable: no other cluster node could take or send a copy of the file (nothing was stored); retry shortly", "kho tệp tạm thời không khả dụng: không nút nào khác trong cụm nhận hoặc gửi được bản sao của tệp (không có gì được lưu); hãy thử lại sau giây lát", "文件存储暂不可用：集群中没有其他节点能接收或发送该文件的副本（未保存任何内容）；请稍后重试"},
	msgMCPStarting:      {"MCP server starting: %s (a first start may download it); retry shortly", "máy chủ MCP đang khởi động: %s (lần khởi động đầu có thể phải tải về); hãy thử lại sau giây lát", "MCP 服务器正在启动：%s（首次启动可能需要下载）；请稍后重试"},
	msgInternal:         {"internal error", "lỗi nội bộ", "内部错误"},
}

// text renders msg in lang with args.
func (m msgID) text(lang int, args ...any) string {
	row, ok := catalogue[m]
	if !ok {
		return string(m)
	}
	f := row[lang]
	if len(args) == 0 {
		return f
	}
	return fmt.Sprintf(f, args...)
}

// langOf is the language of rc's Accept-Language.
func langOf(rc *fasthttp.RequestCtx) int {
	return parseLang(string(rc.Request.Header.Peek("Accept-Language")))
}

// parseLang picks the best supported language of an Accept-Language value
// (RFC 9110: q-values, region subtags such as vi-VN); English when none.
func parseLang(h string) int {
	best, bestQ := langEN, 0.0
	for part := range strings.SplitSeq(h, ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if p := strings.TrimSpace(params); strings.HasPrefix(p, "q=") {
			v, err := strconv.ParseFloat(p[2:], 64)
			if err != nil || v < 0 || v > 1 {
				continue
			}
			q = v
		}
		primary, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(tag)), "-")
		for i, l := range langTags {
			if primary == l && q > bestQ {
				best, bestQ = i, q
			}
		}
	}
	return best
}
