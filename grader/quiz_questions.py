"""The quiz's questions (grade.py --quiz): each one under one id, its languages side by side.

Pure data, imported by quiz.py and by messages.py, which adds QUIZ_TEXT to
its tables: so every question exists in every language with the same
placeholders, and the test that keeps the message tables complete covers
the quiz too. A placeholder names an observation of the run
(quiz.observations computes them all from the evidence); no value the
questions quote is typed here.

Each option is (choice, why): the right one's why says why it is right, each
wrong one's why says why that choice is wrong. In the bank the right option
comes first; the quiz shuffles every question's options from its seed. The
options of a question are of a like length, so that the longest is no hint
(tests/test_grader_quiz.py counts it, in each language).
"""
import collections

Question = collections.namedtuple("Question", "id texts")
Text = collections.namedtuple("Text", "observed question options")

QUESTIONS = (
    # What each row of the evidence table proves, and what it does not prove about the next.
    Question("ack-is-not-the-mark", {
        "en": Text(
            observed="crash-after-ack: publisher #1 exited {crash_exit} right after it saw the ACK ({crash_ack}); "
                     "the source's outbox says {crash_outbox:term}; the sink's inbox row is {crash_inbox:term} "
                     "and its inventory is {crash_inventory}.",
            question="The publisher saw the ACK, yet the outbox still says {crash_outbox:term}. What do these rows prove?",
            options=(
                ("The sink applied snack-7 and the publisher held the proof of it, but died before it wrote the mark.",
                 "Each row is a separate observation, and no stage proves the next: the ACK row is what publisher #1 "
                 "held, the outbox row what the source recorded, and the process died between the two (exit "
                 "{crash_exit}). Neither DB is wrong. See docs/lab.md, \"Reading it\"."),
                ("snack-7 was lost: the process died in the middle of its batch, so the sink's rows cannot be trusted.",
                 "The sink's rows are its own record, read by the grader with a connection of its own: an inbox row "
                 "{crash_inbox:term}, inventory {crash_inventory}. A publisher that dies does not undo the sink's commit."),
                ("The ACK proves delivery, so the source is out of date and the row should be set to sent by hand.",
                 "The mark is the source's own record, written only by a publisher that holds a verified ACK. Setting it "
                 "by hand skips that; the next publisher settles it safely by re-sending, and the inbox answers duplicate."),
                ("The sink acted too soon: it must not apply an event that the source still records as pending.",
                 "The sink cannot know what the source has recorded, and need not: it applies each id once. A pending row "
                 "at the source only means that no proof of delivery has been recorded there yet."),
            ),
        ),
        "ja": Text(
            observed="crash-after-ackで、パブリッシャー1号はACK（{crash_ack}）を受け取った直後に、終了コード{crash_exit}で"
                     "終わりました。受付DBのoutboxは{crash_outbox:term}、倉庫のinboxの行は{crash_inbox:term}、"
                     "在庫は{crash_inventory}です。",
            question="パブリッシャーはACKを受け取ったのに、outboxはまだ{crash_outbox:term}です。この2つの行から"
                     "何が言えますか。",
            options=(
                ("倉庫は適用し、パブリッシャーも証拠を受け取ったが、完了印を保存する前に終了した。",
                 "行はそれぞれ別々の観測で、1つの段階が次の段階を自動的に証明するわけではありません。ACKの行は"
                 "パブリッシャー1号が受け取ったもの、outboxの行は受付DBが記録したものです。プロセスはその2つの"
                 "間で終了しました（終了コード{crash_exit}）。どちらのDBも間違っていません。"
                 "docs/lab.ja.mdの「表の読み方」を参照してください。"),
                ("snack-7は失われた。プロセスが途中で終了したので、倉庫の行は信頼できない。",
                 "倉庫の行は倉庫自身の記録で、採点ツールが別の接続で読んだものです。inboxの行は"
                 "{crash_inbox:term}、在庫は{crash_inventory}です。パブリッシャーが終了しても、倉庫のコミットは"
                 "取り消されません。"),
                ("ACKは配信の証拠なので、受付DBの情報が古い。行は手作業で完了にすべきである。",
                 "完了印は受付DB自身の記録で、確認できるACKを受け取ったパブリッシャーだけが付けます。手作業で付ける"
                 "と、その確認を飛ばすことになります。次のパブリッシャーが同じIDで再送すれば、inboxが重複と答えて"
                 "安全に決着します。"),
                ("倉庫が先走った。受付DBでまだ未完了のイベントを、倉庫が適用してはいけない。",
                 "倉庫は受付DBの記録を知りませんし、知る必要もありません。IDごとに1回だけ適用するだけです。受付DBの"
                 "未完了の行が意味するのは、配信の証拠がまだそこに記録されていない、ということだけです。"),
            ),
        ),
    }),
    # What counts as proof of delivery.
    Question("proof-of-delivery", {
        "en": Text(
            observed="crash-after-ack: publisher #1 got the answer {crash_ack} for snack-7 and exited {crash_exit} "
                     "before marking it; publisher #2 got {crash_final_ack}, and only then did the source's outbox say "
                     "{crash_final_outbox:term}.",
            question="Which answer from the sink counts as proof that snack-7 was delivered, so that it may be marked sent?",
            options=(
                ("Only a 200 whose small, complete JSON body says ack true for this very id (and the same digest, if any).",
                 "That is the verified ACK send_http checks: status 200, a complete body within its size limit, "
                 "\"ack\": true and the id it sent. Publisher #2 marked snack-7 only after one ({crash_final_ack}). "
                 "See docs/lab.md, step 8 (send_http)."),
                ("Any 2xx status from the sink's /events, whatever its body, since the sink answers 2xx only after a commit.",
                 "A status alone does not say which event was applied: a proxy, another service, or a sink holding another "
                 "payload can answer 200. The ACK must name this id and say ack true."),
                ("An ACK that says ack true for any id, as long as it comes back on the connection the event went out on.",
                 "An ACK for another id proves another delivery; marking snack-7 on it could lose snack-7. The kit "
                 "refuses a wrong-id ACK, an oversized response and a redirect alike."),
                ("The final answer after following a redirect to the sink's new address, if that answer says ack true.",
                 "The sender follows no redirect: the event could end up anywhere but the loopback /events it was meant "
                 "for, and an ACK from there proves nothing about the sink."),
            ),
        ),
        "ja": Text(
            observed="crash-after-ackで、パブリッシャー1号はsnack-7に対してACK（{crash_ack}）を受け取り、完了印を"
                     "付ける前に終了コード{crash_exit}で終わりました。パブリッシャー2号はACK（{crash_final_ack}）を受け取り、"
                     "そのあとで初めて受付DBのoutboxが{crash_final_outbox:term}になりました。",
            question="倉庫からのどの応答なら、snack-7が配信された証拠とみなして完了印を付けてよいですか。",
            options=(
                ("200で、上限内の完全なJSON本文がこのIDに\"ack\": trueと答え、ダイジェストもあれば一致する応答だけ。",
                 "これがsend_httpの確かめる、確認できるACKです。ステータス200、上限内に収まる完全な本文、"
                 "\"ack\": true、送ったものと同じIDがそろって初めて証拠になります。パブリッシャー2号も、この"
                 "ACK（{crash_final_ack}）を受け取ってから完了印を付けました。docs/lab.ja.mdの手順8（send_http）を"
                 "参照してください。"),
                ("倉庫の/eventsが返す2xxなら、本文に関係なく証拠になる。倉庫はコミットしてから2xxを返すからである。",
                 "ステータスだけでは、どのイベントが適用されたかは分かりません。プロキシや別のサービス、別のペイロードを"
                 "持つ倉庫でも200は返せます。ACKは、このIDを名指しして\"ack\": trueと答えていなければなりません。"),
                ("イベントを送ったのと同じ接続で返ってきたなら、どのIDに対する\"ack\": trueでも証拠になる。",
                 "別のIDに対するACKは、別の配信の証拠です。それでsnack-7に完了印を付けると、snack-7を失うことが"
                 "あります。キットは誤ったIDのACKも、過大な応答も、リダイレクトも同じように拒否します。"),
                ("倉庫の新しいアドレスへのリダイレクトをたどり、その先が\"ack\": trueと答えれば証拠になる。",
                 "送信処理はリダイレクトに従いません。イベントが、送るはずだったloopbackの/events以外のどこかへ届く"
                 "おそれがあり、そこからのACKは倉庫について何も証明しないからです。"),
            ),
        ),
    }),
    Question("no-ack-is-no-proof", {
        "en": Text(
            observed="dropped-response: publisher #1 raised {drop_error} and saw no ACK ({drop_ack:term}); yet the "
                     "sink's inbox row is {drop_inbox:term}, its deliveries read {drop_deliveries:terms}, and its "
                     "inventory is {drop_inventory}.",
            question="What does the missing ACK tell you about the sink?",
            options=(
                ("Nothing on its own: the sink may or may not have applied it; only its rows can tell you.",
                 "The lack of an ACK is not evidence that nothing happened: in this run the sink committed the receipt "
                 "(inventory {drop_inventory}), then the answer was lost. The publisher cannot tell that from a request "
                 "that never arrived, so snack-7 stays {drop_outbox:term}. See docs/lab.md, \"Reading it\"."),
                ("That the sink never received snack-7, so the next send will be its first and only delivery.",
                 "Here the sink did receive it: its inbox row is {drop_inbox:term} and the inventory {drop_inventory}. "
                 "The answer was lost after the commit, and the publisher cannot tell."),
                ("That the sink refused snack-7, so sending it again the same way will be refused as well.",
                 "A refusal is an answer (a 409 or another 4xx), and the publisher would have seen it. Here no answer "
                 "came at all ({drop_error}): a transient failure, which a later attempt may get past."),
                ("That the sink applied snack-7 twice: once for the request and once for the lost answer.",
                 "A lost answer applies nothing: the deliveries read {drop_deliveries:terms} and the inventory is "
                 "{drop_inventory}, one application."),
            ),
        ),
        "ja": Text(
            observed="dropped-responseで、パブリッシャー1号は{drop_error}を送出し、ACKは受け取っていません"
                     "（{drop_ack:term}）。それでも、倉庫のinboxの行は{drop_inbox:term}、deliveriesは{drop_deliveries:terms}、"
                     "在庫は{drop_inventory}です。",
            question="ACKが返ってこなかったことから、倉庫について何が言えますか。",
            options=(
                ("それだけでは何も言えない。適用の有無は倉庫自身の行でしか分からない。",
                 "ACKがないことは、何も起きなかった証拠ではありません。この実行では、倉庫は受信をコミットし"
                 "（在庫{drop_inventory}）、そのあとで応答が失われました。パブリッシャーからはリクエストが届かなかった"
                 "場合と区別できないので、snack-7は{drop_outbox:term}のまま残ります。docs/lab.ja.mdの"
                 "「表の読み方」を参照してください。"),
                ("倉庫はsnack-7を受け取っていない。次の送信が、最初で唯一の配信になる。",
                 "この実行では倉庫は受け取っています。inboxの行は{drop_inbox:term}、在庫は{drop_inventory}です。"
                 "コミットのあとで応答が失われただけで、パブリッシャーにはそれが分かりません。"),
                ("倉庫はsnack-7を拒否した。同じように送り直しても、また拒否される。",
                 "拒否も応答の1つ（409やほかの4xx）で、返ってくればパブリッシャーに分かります。ここでは応答そのものが"
                 "ありませんでした（{drop_error}）。これは一時的な失敗で、次の試行で通ることがあります。"),
                ("倉庫はsnack-7を2回適用した。リクエストの分と、失われた応答の分である。",
                 "応答が失われても、何かが適用されるわけではありません。deliveriesは{drop_deliveries:terms}、"
                 "在庫は{drop_inventory}で、適用は1回です。"),
            ),
        ),
    }),
    Question("two-deliveries-one-application", {
        "en": Text(
            observed="crash-after-ack, after publisher #2 (exit {crash_final_exit}): the sink's deliveries read "
                     "{crash_final_deliveries:terms}, its inventory is {crash_final_inventory}, and the source says "
                     "{crash_final_outbox:term}.",
            question="What does the second entry in the sink's deliveries prove?",
            options=(
                ("The same id arrived again and the inbox knew it: a second delivery, with no second effect.",
                 "The deliveries log keeps every copy that reached receive; the inbox row makes the second a duplicate, "
                 "so the inventory stays {crash_final_inventory}, not 14. Two deliveries, one application: the property "
                 "the grader proves. See docs/lab.md, \"Two deliveries, one application\"."),
                ("That publisher #2 asked the sink first and, finding snack-7, sent only a confirmation.",
                 "Publisher #2 asks the sink nothing: it sends every pending item again under the same id, and it is "
                 "the sink's inbox that makes the second copy a duplicate."),
                ("That the sink applied snack-7 again, then undid the second effect in a compensating step.",
                 "Nothing is undone: receive finds the inbox row in the same transaction and only logs a duplicate "
                 "delivery; the inventory never reached 14."),
                ("That two different events came in, and the sink merged them because their ids matched.",
                 "Same id and same payload: the inbox compares the digest too. Another payload under the same id "
                 "would have been a conflict (409), not a duplicate."),
            ),
        ),
        "ja": Text(
            observed="crash-after-ackで、パブリッシャー2号（終了コード{crash_final_exit}）のあと、倉庫のdeliveriesは"
                     "{crash_final_deliveries:terms}、在庫は{crash_final_inventory}、受付DBのoutboxは"
                     "{crash_final_outbox:term}です。",
            question="倉庫のdeliveriesにある2つ目の記録は、何を立証していますか。",
            options=(
                ("同じIDがもう一度届き、inboxがそれを見分けた。配信は2回、適用は1回だけだった。",
                 "deliveriesには、receiveに届いた配信がすべて残ります。inboxに行があるので2つ目は重複になり、在庫は"
                 "14ではなく{crash_final_inventory}のままです。これが採点ツールの立証する性質、2回の配信・1回の適用"
                 "です。docs/lab.ja.mdの「2回の配信・1回の適用」を参照してください。"),
                ("パブリッシャー2号が先に倉庫に問い合わせ、snack-7があったので確認だけを送った。",
                 "パブリッシャー2号は倉庫に何も問い合わせません。未完了の項目をすべて同じIDで送り直し、2つ目を"
                 "重複にするのは倉庫のinboxです。"),
                ("倉庫はsnack-7をもう一度適用し、そのあとで2回目の効果を打ち消す処理をした。",
                 "何も打ち消されていません。receiveは同じトランザクションの中でinboxの行を見つけ、重複の配信を"
                 "記録するだけです。在庫が14になったことは一度もありません。"),
                ("ペイロードの違う2つのイベントが届き、IDが同じだったので、倉庫がそれを1つにまとめた。",
                 "IDもペイロードも同じです。inboxはダイジェストも比べます。同じIDでペイロードが違えば、重複ではなく衝突（409）に"
                 "なっていました。"),
            ),
        ),
    }),
    # Why neither order of send and mark gives exactly once.
    Question("neither-order", {
        "en": Text(
            observed="crash-after-ack: the publisher marks only after the ACK; publisher #1 died between the two "
                     "(exit {crash_exit}), and once publisher #2 had sent it again the sink logged "
                     "{crash_final_deliveries:terms}.",
            question="Why does neither order of \"send\" and \"mark sent\" give exactly one delivery?",
            options=(
                ("Marking first loses an item that dies before it is sent; marking after may send it twice.",
                 "sent=1 before sending makes the next pending query skip an item that may never have left; marking "
                 "after sending leaves a window between the ACK and the mark, where publisher #1 died here. The lab "
                 "chooses the second and lets the inbox absorb the re-send. See docs/lab.md, step 7 (dispatch)."),
                ("Either order gives one delivery if the send and the mark happen in one SQLite transaction.",
                 "A SQLite transaction covers the source DB alone; the POST goes to another process. A write "
                 "transaction held open during the request would also block intake, which the kit forbids."),
                ("Marking after sending does give exactly once, as long as the publisher never crashes.",
                 "This run crashed on purpose (exit {crash_exit}), and a lost response does the same with no crash at "
                 "all (dropped-response). Rare is not never: the design must hold when it happens."),
                ("Marking first is exactly once; the kit marks after sending only because it is easier to test.",
                 "Marking first can lose an event for good: if the process dies after the mark and before the POST, no "
                 "publisher will ever send it. The kit accepts a duplicate so as never to lose one."),
            ),
        ),
        "ja": Text(
            observed="crash-after-ackで、パブリッシャーはACKのあとで初めて完了印を付けます。パブリッシャー1号はACKと"
                     "完了印の間で終了し（終了コード{crash_exit}）、パブリッシャー2号が送り直すと、倉庫のdeliveriesは"
                     "{crash_final_deliveries:terms}になりました。",
            question="送信と完了印のどちらを先にしても、配信がちょうど1回にならないのはなぜですか。",
            options=(
                ("先に印を付けると、送る前に落ちた項目を失う。あとで付けると、2回送ることがある。",
                 "送る前にsent=1を保存すると、送信の途中で落ちた項目が、次の照会で消えてしまいます。送ったあとで"
                 "印を付けると、ACKと印の間で終了したときに再送が起こります。この実行のパブリッシャー1号が"
                 "そうでした。このラボは後者を選び、再送をinboxで吸収します。docs/lab.ja.mdの手順7（dispatch）を"
                 "参照してください。"),
                ("送信と完了印を1つのSQLiteトランザクションに入れれば、どちらの順でも1回になる。",
                 "SQLiteのトランザクションが及ぶのは受付DBだけで、POSTの相手は別のプロセスです。リクエストの間"
                 "書き込みトランザクションを開いたままにすると、注文の受付も止まります。キットはそれを禁じています。"),
                ("送ったあとで印を付ければ、パブリッシャーが落ちない限り、ちょうど1回になる。",
                 "この実行は意図して落としたもので（終了コード{crash_exit}）、応答が失われれば、落ちなくても同じことが"
                 "起こります（dropped-response）。まれでも、起こらないわけではありません。起きたときにも成り立つ"
                  "設計でなければなりません。"),
                ("先に印を付ければちょうど1回になる。キットがあとで付けるのは、テストしやすいからにすぎない。",
                 "先に印を付けると、イベントを永久に失うことがあります。印のあと、POSTの前に落ちれば、その項目を"
                 "送るパブリッシャーはもう現れません。キットは、失わないために重複を受け入れます。"),
            ),
        ),
    }),
    # Why re-sending with the same id is safe, and deleting to remove the uncertainty is not (Q4 and Q5 of 3.0.0).
    Question("resend-never-delete", {
        "en": Text(
            observed="dropped-response, after publisher #1: its dispatch let out \"{drop_message}\"; the source says "
                     "{drop_outbox:term}; the sink's inventory is {drop_inventory}. Publisher #2 then sent it again, "
                     "and the sink logged {drop_final_deliveries:terms}.",
            question="You find this state on a live system: a pending row, and no answer came. What do you do?",
            options=(
                ("Let the publisher send it again under the same id; the sink's inbox settles whether it applied.",
                 "The publisher cannot tell a lost answer from a lost request. Re-sending with the same id is right in "
                 "both cases: a first delivery is applied, a second is a duplicate with no second effect, as publisher "
                 "#2's {drop_final_deliveries:terms} shows. See docs/lab.md, \"Why re-send with the same id, and never "
                 "delete\"."),
                ("Mark the row sent by hand: the sink's inventory of {drop_inventory} shows that it was delivered.",
                 "Here the inventory happens to show it; another time the request never arrived, and a mark made by "
                 "hand loses the order for good. The mark rests on a verified ACK, and re-sending gets one safely."),
                ("Delete the pending row: the sink already has the event, so the row is only a leftover of the failure.",
                 "Deleting destroys the evidence and, had the request never arrived, the order too. Nothing is deleted "
                 "to make the uncertainty go away."),
                ("Send snack-7 again under a new id, so that the sink does not take it for a duplicate and drop it.",
                 "Under a new id the inbox cannot recognise it: the sink applies it a second time (inventory 14). The "
                 "duplicate answer is the point: same id, no second effect."),
            ),
        ),
        "ja": Text(
            observed="dropped-responseで、パブリッシャー1号のdispatchは「{drop_message}」をそのまま伝えました。受付DBの"
                     "outboxは{drop_outbox:term}、倉庫の在庫は{drop_inventory}です。そのあとパブリッシャー2号が送り"
                     "直すと、倉庫のdeliveriesは{drop_final_deliveries:terms}になりました。",
            question="本番のシステムで、応答が返らず未完了の行が残ったこの状態を見つけました。どうしますか。",
            options=(
                ("パブリッシャーに同じIDで送り直させる。あとは倉庫のinboxが決着を付ける。",
                 "パブリッシャーからは、応答が失われたのか、リクエストが届かなかったのかを区別できません。同じIDでの"
                 "再送は、どちらの場合にも正しい手です。届いていなければ最初の配信として適用され、届いていれば"
                 "2回目の効果を持たない重複になります。パブリッシャー2号の{drop_final_deliveries:terms}がその"
                 "例です。docs/lab.ja.mdの「同じIDで再送し、決して削除しない理由」を参照してください。"),
                ("手作業で完了印を付ける。倉庫の在庫が{drop_inventory}なので、配信されたことは明らかである。",
                 "この実行では在庫がたまたまそれを示していますが、リクエストが届いていなかった場合、手作業の印は"
                 "注文を永久に失わせます。完了印の根拠は確認できるACKで、再送すれば安全にそれが得られます。"),
                ("未完了の行を削除する。倉庫はもうイベントを持っているので、この行は失敗の残骸にすぎない。",
                 "削除すると証拠が壊れ、リクエストが届いていなかった場合は注文も失われます。不確実性を消すために"
                 "データを削除してはいけません。"),
                ("重複と見なされて適用されないように、snack-7を新しいIDで送り直す。",
                 "新しいIDでは、inboxは同じイベントだと見分けられません。倉庫はもう一度適用し、在庫は14になります。"
                 "重複という答えこそが狙いです。同じIDなら、2回目の効果はありません。"),
            ),
        ),
    }),
    # What the check covered, and what it did not.
    Question("what-the-check-covered", {
        "en": Text(
            observed="crash-after-ack: publisher #1 ended with os._exit({crash_exit}) right after the ACK; publisher #2, "
                     "a new process, reopened the same source file and exited {crash_final_exit}; the grader read both "
                     "DB files with connections of its own: inventory {crash_final_inventory}, outbox "
                     "{crash_final_outbox:term}.",
            question="What did this run prove?",
            options=(
                ("That the property holds when a process dies at the worst moment and new ones reopen those files.",
                 "os._exit({crash_exit}) ends a process, not the host: the files stay on the same, working disk with "
                 "everything SQLite had handed to the operating system, and new processes read them again. See "
                 "docs/lab.md, \"What this proves, and what it does not\"."),
                ("That a committed transaction survives a power cut on this machine, since the files were intact.",
                 "Only a process ended; the host kept running with its page cache. Whether a commit survives a power cut "
                 "depends on the disk, its cache and the file system, which no test here controls (SQLite's \"Atomic "
                 "Commit\")."),
                ("That the sink's DB survives a disk failure, because its inventory was still there when read back.",
                 "The disk never failed: the same disk was read again. Surviving a disk failure takes another copy of "
                 "the data, which this run says nothing about."),
                ("That delivery works the same beyond loopback, since real HTTP over real sockets was used here.",
                 "Real sockets, but on 127.0.0.1 only: no latency, loss, proxies or partitions of a real network. "
                 "Delivery and performance beyond loopback are other tests."),
            ),
        ),
        "ja": Text(
            observed="crash-after-ackで、パブリッシャー1号はACKの直後にos._exit({crash_exit})で終了し、新しいプロセスで"
                     "あるパブリッシャー2号が同じ受付DBのファイルを開き直して、終了コード{crash_final_exit}で終わりました。"
                     "採点ツールが自分の接続で2つのDBファイルを読むと、在庫は{crash_final_inventory}、outboxは"
                     "{crash_final_outbox:term}でした。",
            question="この実行で立証されたのは、どれですか。",
            options=(
                ("最悪の瞬間に終了したプロセスのファイルを新しいプロセスが開き直しても、性質が保たれること。",
                 "os._exit({crash_exit})で終わるのはプロセスであって、ホストではありません。ファイルは、SQLiteがOSに"
                 "渡した内容をすべて保ったまま、正常な同じディスクに残り、新しいプロセスがそれを読み直します。"
                 "docs/lab.ja.mdの「このラボが立証すること、しないこと」を参照してください。"),
                ("ファイルが無事だったので、コミット済みのトランザクションがこのマシンの電源遮断に耐えること。",
                 "終了したのはプロセスだけで、ホストはページキャッシュを保ったまま動き続けていました。コミットが"
                 "電源遮断に耐えるかどうかは、ディスクとそのキャッシュ、ファイルシステムによって決まり（SQLiteの"
                 "「Atomic Commit」）、このラボのテストはそのどれも制御していません。"),
                ("読み直したときに在庫がそのまま残っていたので、倉庫DBがディスク障害にも耐えること。",
                 "ディスク障害は起きていません。同じディスクを読み直しただけです。ディスク障害に耐えるには、データの"
                 "別のコピーが要ります。この実行は、それについて何も示していません。"),
                ("実際のソケットでHTTPを使ったので、loopback以外のネットワークでも同じように配信できること。",
                 "ソケットは本物ですが、127.0.0.1だけです。実際のネットワークの遅延、損失、プロキシ、分断はありません。"
                 "loopback以外のネットワークでの配信と性能は、別の検証です。"),
            ),
        ),
    }),
    Question("what-it-did-not-cover", {
        "en": Text(
            observed="crash-after-ack: publisher #1 exited {crash_exit}, publisher #2 exited {crash_final_exit}; "
                     "dropped-response: publisher #1 raised {drop_error}, publisher #2 exited {drop_final_exit}; the "
                     "inventories ended at {crash_final_inventory} and {drop_final_inventory}.",
            question="Which of these did the checks you just ran NOT cover?",
            options=(
                ("The sink's DB restored from a backup taken before snack-7 arrived.",
                 "A sink restored from an older copy has forgotten the ids it applied since, and applies them again; a "
                 "restored source has lost the orders taken in since. Restores, power loss, disk failure and networks "
                 "beyond loopback are other tests. See docs/lab.md, \"What this proves, and what it does not\"."),
                ("A publisher killed right after the ACK, before it had recorded the mark.",
                 "That is crash-after-ack itself: publisher #1 exited {crash_exit} right after the ACK."),
                ("A response lost after the sink had already committed the receipt.",
                 "That is dropped-response: publisher #1 raised {drop_error} while the sink had already applied "
                 "snack-7 (inventory {drop_final_inventory})."),
                ("A new publisher process reopening the files a killed one left behind.",
                 "Publisher #2 is a new process on the same files: it exited {crash_final_exit} in crash-after-ack "
                 "and {drop_final_exit} in dropped-response."),
            ),
        ),
        "ja": Text(
            observed="crash-after-ackでは、パブリッシャー1号が終了コード{crash_exit}、パブリッシャー2号が終了コード"
                     "{crash_final_exit}で終わりました。dropped-responseでは、パブリッシャー1号が{drop_error}を送出し、"
                     "パブリッシャー2号が終了コード{drop_final_exit}で終わりました。最後の在庫は、crash-after-ackが"
                     "{crash_final_inventory}、dropped-responseが{drop_final_inventory}です。",
            question="いま実行したチェックの対象に含まれていないのは、どれですか。",
            options=(
                ("snack-7が届く前に取ったバックアップから復旧した倉庫DB。",
                 "古いコピーから復旧した倉庫は、それ以降に適用したIDを忘れていて、もう一度適用します。復旧した"
                 "受付DBは、それ以降に受け付けた注文を失っています。バックアップからの復旧、ホストの電源遮断、"
                 "ディスク障害、loopback以外のネットワークは、別の検証です。docs/lab.ja.mdの「このラボが立証する"
                 "こと、しないこと」を参照してください。"),
                ("ACKの直後、完了印を保存する前に終了させられたパブリッシャー。",
                 "これはcrash-after-ackそのものです。パブリッシャー1号は、ACKの直後に終了コード{crash_exit}で"
                 "終了しました。"),
                ("倉庫が受信をコミットしたあとで失われた応答。",
                 "これはdropped-responseです。パブリッシャー1号が{drop_error}を送出したとき、倉庫はすでにsnack-7を"
                 "適用していました（在庫{drop_final_inventory}）。"),
                ("終了させられたプロセスのファイルを、新しいパブリッシャーが開き直すこと。",
                 "パブリッシャー2号は、同じファイルを開く新しいプロセスです。crash-after-ackでは終了コード"
                 "{crash_final_exit}、dropped-responseでは終了コード{drop_final_exit}で終わりました。"),
            ),
        ),
    }),
    # What remains the operator's: nothing here schedules retries or shares the work out.
    Question("who-restarts-it", {
        "en": Text(
            observed="crash-after-ack: after publisher #1 exited {crash_exit}, the grader itself started publisher #2, "
                     "which exited {crash_final_exit} with the outbox {crash_final_outbox:term}.",
            question="What does this run tell you about getting a failed publisher going again in production?",
            options=(
                ("Nothing: the grader started publisher #2 itself; retry scheduling and sharing work are yours.",
                 "dispatch runs one finite batch per call; no automatic retry scheduler and no highly available job "
                 "distribution were built or proved here. The kit's relay retries, but these checks did not run it, "
                 "and supervising it stays with the operator. See docs/lab.md, \"What this proves, and what it does "
                 "not\"."),
                ("That the kit restarts a failed publisher within seconds, since publisher #2 came up at once.",
                 "Publisher #2 came up because the grader's scenario started it. Nothing in dispatch restarts anything; "
                 "a supervisor must (a service manager, a scheduler, the relay under one)."),
                ("That another machine takes over by itself, since publisher #2 was a new process of its own.",
                 "A new process on the same host and the same files: nothing here moved the work elsewhere, chose a "
                 "leader or fenced off the old one."),
                ("That no restart is needed: the sink's inbox asks for the event again once the publisher is gone.",
                 "The sink never asks for anything; it only answers requests. An item pending at the source stays "
                 "pending until some publisher sends it."),
            ),
        ),
        "ja": Text(
            observed="crash-after-ackで、パブリッシャー1号が終了コード{crash_exit}で終わったあと、パブリッシャー2号を"
                     "起動したのは採点ツール自身です。パブリッシャー2号は終了コード{crash_final_exit}で終わり、outboxは"
                     "{crash_final_outbox:term}になりました。",
            question="本番で、失敗したパブリッシャーを再び動かすことについて、この実行から何が言えますか。",
            options=(
                ("何も言えない。再び起動したのは採点ツールで、リトライとジョブ分配は運用者の責任である。",
                 "dispatchは、呼び出し1回につき有限の1バッチだけを実行します。自動リトライのスケジューラーや、"
                 "高可用性のあるジョブ分配は、ここでは実装も立証もしていません。キットのリレーはリトライしますが、"
                 "このチェックでは動かしておらず、その監視は運用者の仕事です。docs/lab.ja.mdの「このラボが立証する"
                 "こと、しないこと」を参照してください。"),
                ("パブリッシャー2号がすぐに起動したので、キットは失敗したパブリッシャーを数秒で再起動する。",
                 "パブリッシャー2号を起動したのは、採点ツールのシナリオです。dispatchは何も再起動"
                 "しません。再起動するのは、プロセスを監視する仕組み（サービスマネージャーやスケジューラー、"
                 "またはその配下で動かすリレー）です。"),
                ("パブリッシャー2号は独立した新しいプロセスだったので、別のマシンが自動的に引き継ぐ。",
                 "同じホストで同じファイルを開く新しいプロセスです。仕事を別の場所へ移すことも、リーダーを選ぶことも、"
                 "古いプロセスを締め出すことも、ここでは行っていません。"),
                ("再起動は要らない。パブリッシャーがいなくなると、倉庫のinboxがイベントを求め直す。",
                 "倉庫が自分から何かを求めることはなく、リクエストに答えるだけです。受付DBで未完了の項目は、どれかの"
                 "パブリッシャーが送るまで未完了のままです。"),
            ),
        ),
    }),
    Question("one-sending-loop", {
        "en": Text(
            observed="crash-after-ack: publisher #2 started only after publisher #1 had exited {crash_exit}, one "
                     "publisher at a time; the sink logged {crash_final_deliveries:terms}.",
            question="To go faster, a colleague wants to run two relays on the same source DB. What does this run "
                     "tell you about that?",
            options=(
                ("Nothing that makes it safe: this run had one sending loop at a time. Keep one relay per source DB.",
                 "The checks prove the order of one sending loop. With no claim, lease or fencing, two publishers on "
                 "one source DB pick the same pending rows and send them at once, so neither seq order nor "
                 "stop-on-first-failure holds across them. See docs/lab.md, \"What this proves, and what it does not\"."),
                ("That it is safe: the inbox made the second delivery a duplicate, so any number of relays will be fine.",
                 "The inbox keeps the effect single, but two relays reading the same pending rows send each one twice "
                 "at once and lose seq order across them: nothing decides who owns a batch."),
                ("That it is safe as long as both relays take batches of one item (--limit 1) and never overlap.",
                 "The batch size does not stop two relays from reading the same head row at the same moment; both send "
                 "it, and the order across them is lost."),
                ("That throughput doubles, since the two deliveries in this run came from two processes at once.",
                 "They came one after the other: publisher #2 started only after publisher #1 had exited {crash_exit}."),
            ),
        ),
        "ja": Text(
            observed="crash-after-ackで、パブリッシャー2号が動き始めたのは、パブリッシャー1号が終了コード{crash_exit}で"
                     "終わったあとです。パブリッシャーは一度に1つだけで、倉庫のdeliveriesは{crash_final_deliveries:terms}"
                     "でした。",
            question="速くするために、同じ受付DBでリレーを2つ動かしたいという提案がありました。この実行から、それについて"
                     "何が言えますか。",
            options=(
                ("安全とは言えない。送信ループは一度に1つだった。リレーは受付DBごとに1つにする。",
                 "チェックが立証するのは、1つの送信ループの順序です。claim・lease・fencingがないので、1つの受付DBを"
                 "2つのパブリッシャーが使うと、同じ未完了の行を選んで同時に送ります。seqの順序も"
                 "stop-on-first-failureも、2つの間では成り立ちません。docs/lab.ja.mdの「このラボが立証する"
                 "こと、しないこと」を参照してください。"),
                ("安全だと言える。inboxが2回目の配信を重複にしたので、リレーはいくつあってもよい。",
                 "inboxは効果を1回に保ちますが、同じ未完了の行を読む2つのリレーは、それぞれの項目を同時に2回送り、"
                 "2つの間でseqの順序が崩れます。どちらがバッチを受け持つかを決めるものがありません。"),
                ("どちらのリレーもバッチを1件ずつ（--limit 1）にすれば、重ならないので安全だと言える。",
                 "バッチの大きさをどう変えても、2つのリレーが同じ瞬間に同じ先頭の行を読むことは防げません。どちらも"
                 "それを送り、2つの間の順序は失われます。"),
                ("この実行の2回の配信は2つのプロセスが同時に行ったので、処理量は2倍になると言える。",
                 "2回の配信は順番に行われました。パブリッシャー2号が動き始めたのは、1号が終了コード{crash_exit}で"
                 "終わったあとです。"),
            ),
        ),
    }),
    # What an operator watches, and why not the count of successful sends.
    Question("watch-each-gauge", {
        "en": Text(
            observed="dropped-response: publisher #1's send failed ({drop_error}), yet the sink applied snack-7 "
                     "(inventory {drop_inventory}); publisher #2's send succeeded, and the sink logged "
                     "{drop_final_deliveries:terms}.",
            question="As an operator, what do you watch, rather than the count of successful sends?",
            options=(
                ("The pending count, the oldest pending item's age, attempts, duplicates and conflicts, apart.",
                 "Here a failed send had an effect and a successful one was only a duplicate: a count of successful "
                 "sends shows neither. The age of the oldest pending item grows whatever the cause (sink down, relay "
                 "stopped, head stuck), and duplicates and conflicts say what the sink saw. See docs/operating.md, \"Operating it\"."),
                ("The rate of successful sends per minute, with an alert when it stays below its usual level.",
                 "A failed send here had an effect and a successful one was only a duplicate; a quiet hour lowers the "
                 "rate with nothing wrong. The oldest pending item's age says whether the line moves."),
                ("The relay's HTTP error rate, since every stuck or lost item shows up as a failed request.",
                 "A line stuck behind a stopped relay makes no requests at all, and a lost answer after a commit counts "
                 "as an error although the sink applied the event."),
                ("The sink's inventory against the source's orders, compared once a day by a job.",
                 "Reconciling helps, but once a day is late and says nothing about why; the gauges show a stuck head, an "
                 "outage or conflicts as they happen."),
            ),
        ),
        "ja": Text(
            observed="dropped-responseで、パブリッシャー1号の送信は{drop_error}で失敗しましたが、倉庫はsnack-7を"
                     "適用しています（在庫{drop_inventory}）。パブリッシャー2号の送信は成功し、倉庫のdeliveriesは"
                     "{drop_final_deliveries:terms}になりました。",
            question="運用者は、送信成功の回数の代わりに、何を見ますか。",
            options=(
                ("未完了の項目数、最も古い未完了の経過時間、試行回数、受信の重複数、衝突数を分けて見る。",
                 "この実行では、失敗した送信に効果があり、成功した送信は重複にすぎませんでした。送信成功の回数からは、"
                 "そのどちらも分かりません。最も古い未完了の経過時間は、原因が何であれ（倉庫の停止、リレーの停止、"
                 "先頭の詰まり）増えていき、受信の重複数と衝突数は倉庫が見たものを示します。docs/operating.ja.mdの"
                 "「運用する」を参照してください。"),
                ("1分あたりの送信成功の回数を見て、普段より低い状態が続いたらアラートを出す。",
                 "この実行では、失敗した送信に効果があり、成功した送信は重複でした。注文の少ない時間帯にも、何も"
                 "問題がないまま値は下がります。キューが進んでいるかは、最も古い未完了の経過時間で分かります。"),
                ("リレーのHTTPエラー率を見る。詰まった項目や失われた項目は、すべて失敗したリクエストに現れる。",
                 "リレーが止まって詰まったキューは、リクエストをまったく出しません。また、コミットのあとで応答が"
                 "失われると、倉庫は適用しているのにエラーとして数えられます。"),
                ("倉庫の在庫と受付DBの注文を、1日1回の突き合わせジョブで比べる。",
                 "突き合わせは役に立ちますが、1日1回では遅く、原因も分かりません。先頭の詰まり、倉庫の停止、衝突は、"
                 "指標なら起きたときに分かります。"),
            ),
        ),
    }),
    # Stop on the first failure, versus skipping the failed item.
    Question("stop-on-first-failure", {
        "en": Text(
            observed="stop-on-first-failure: in a batch A, B, C whose send fails on B, send was called for "
                     "{stop_first_calls}; the sent flags then read {stop_flags}; the next dispatch sent {stop_resumed}.",
            question="Why does dispatch stop at B, rather than skip B and send C?",
            options=(
                ("Stopping keeps each recorded state true and the order intact: the next call resumes at B, then C.",
                 "Stop-on-first-failure is a contract the lab chose on purpose: A is done, B failed, C was never tried, "
                 "and each state stays recorded ({stop_flags}). Skipping B would send C before B, which means something "
                 "else wherever order matters. See docs/lab.md, step 7 (dispatch)."),
                ("Because B's failure means the sink is down, so C would fail as well and its request would be wasted.",
                 "B may fail for reasons of its own (a conflict, a bad payload) while the sink is up; dispatch stops for "
                 "the order, not to save a request."),
                ("So that the batch is all or nothing: when B fails, dispatch rolls A back as well.",
                 "Nothing is rolled back: A stays sent ({stop_flags}). Each item is marked on its own ACK; a batch is "
                 "not a transaction."),
                ("Because marking C before B would leave a gap in seq, which SQLite requires to be contiguous.",
                 "seq need not be contiguous, and no index cares; the reason is the order of effects at the sink, not a "
                 "rule of the DB."),
            ),
        ),
        "ja": Text(
            observed="stop-on-first-failureで、Bのsendが失敗するA・B・Cのバッチでは、sendは{stop_first_calls}に対して"
                     "呼ばれました。そのときのsent列は{stop_flags}で、次のdispatchは{stop_resumed}を送りました。",
            question="dispatchが、Bを飛ばしてCを送るのではなく、Bで止まるのはなぜですか。",
            options=(
                ("止まれば各状態が正しく残り、順序も崩れない。次の呼び出しはBから再開する。",
                 "stop-on-first-failureは、このラボが明示的に選んだ契約です。Aは完了、Bは失敗、Cはまだ試していない、"
                 "という状態がそれぞれ記録されます（{stop_flags}）。Bを飛ばすとCがBより先に送られ、順序が重要な"
                 "業務では別の意味になります。docs/lab.ja.mdの手順7（dispatch）を参照してください。"),
                ("Bが失敗したのは倉庫が止まっているからで、Cも失敗し、リクエストが無駄になるから。",
                 "倉庫が動いていても、Bは自分自身の理由（衝突、ペイロードの誤り）で失敗することがあります。dispatchが"
                 "止まるのは順序のためで、リクエストを節約するためではありません。"),
                ("バッチを不可分（全部か無か）にするため。Bが失敗したら、dispatchはAも元に戻す。",
                 "何も元に戻されません。Aは完了のままです（{stop_flags}）。完了印は項目ごとに、それぞれのACKで"
                 "付けます。バッチはトランザクションではありません。"),
                ("CをBより先に完了にするとseqに穴が開き、SQLiteはseqが連続していることを求めるから。",
                 "seqは連続している必要がなく、インデックスもそれを気にしません。理由は倉庫での効果の順序であって、"
                 "DBの規則ではありません。"),
            ),
        ),
    }),
    # Reordering: what a quarantine does to the order, and what is recorded of it.
    Question("reordering-is-recorded", {
        "en": Text(
            observed="stop-on-first-failure: while B failed, C was never sent ({stop_first_calls}); the next dispatch "
                     "sent {stop_resumed}, so the sink saw them in seq order.",
            question="Suppose the head item B can never be delivered, and an operator quarantines it so that C can "
                     "flow. What must be known afterwards?",
            options=(
                ("That C overtook B: the kit records each seq sent while B was out of the line (overtaken_by).",
                 "Taking B out of the line changes the order the sink sees. The record says which items went ahead, so "
                 "that whoever owns B can judge the effect before requeuing it. See docs/operating.md, \"Alert, quarantine, fix, "
                 "requeue\"."),
                ("Nothing: the sink's inbox restores the seq order by holding C back until B arrives.",
                 "The inbox deduplicates by id; it neither orders nor holds anything. C is applied when it arrives."),
                ("Only that B failed: order matters within one batch alone, and B and C share a batch anyway.",
                 "Order matters across batches as much as within one: a debit applied before its credit is wrong "
                 "whichever call sent it."),
                ("That the seq of B and C must be swapped in the outbox, so that the recorded order is true again.",
                 "Rewriting seq rewrites history: the outbox keeps the order of intake, and the reordering is recorded "
                 "beside it, never hidden."),
            ),
        ),
        "ja": Text(
            observed="stop-on-first-failureで、Bが失敗した呼び出しでは、sendが呼ばれたのは{stop_first_calls}だけで、"
                     "Cは送られませんでした。"
                     "次のdispatchは{stop_resumed}を送ったので、倉庫にはseqの順に届きました。",
            question="先頭の項目Bがいつまでたっても配信できないため、Cを流せるように運用者がBを隔離したとします。あとで"
                     "何が分かっていなければなりませんか。",
            options=(
                ("CがBを追い越したこと。Bが外れていた間に完了したseqをキットが記録する（overtaken_by）。",
                 "Bをキューから外すと、倉庫から見た順序が変わります。どの項目が先に進んだかが記録されるので、Bの"
                 "担当者は再投入の前にその影響を判断できます。docs/operating.ja.mdの「アラート・隔離・修正・再投入」を"
                 "参照してください。"),
                ("何も要らない。倉庫のinboxがCを止めておき、Bが届いてからseqの順序に戻す。",
                 "inboxはIDで重複を見分けるだけで、並べ替えも保留もしません。Cは届いたときに適用されます。"),
                ("Bが失敗したことだけ。順序が意味を持つのは1つのバッチの中だけで、BとCは同じバッチにある。",
                 "順序は、バッチの中でもバッチをまたいでも意味を持ちます。入金より先に出金を適用すれば、どの呼び出しが"
                 "送ったかに関係なく誤りです。"),
                ("記録上の順序が正しくなるように、outboxのBとCのseqを入れ替えること。",
                 "seqを書き換えるのは、履歴を書き換えることです。outboxは受付の順序を保ち、順序の入れ替わりはその"
                 "横に記録します。決して隠しません。"),
            ),
        ),
    }),
    # Transient versus permanent failures: what the relay did with each, in this run.
    Question("transient-or-permanent", {
        "en": Text(
            observed="a relay across a sink outage: {outage_failures} rounds with no answer, retried with no alert, "
                     "then delivered; a relay against a sink that answered {refused_kind:term} for snack-7: {refused_count} "
                     "refusals, then the alert (--max-attempts {refused_max}), with snack-7 still at the head.",
            question="Why did the relay treat these two failures differently?",
            options=(
                ("No answer may pass once the sink is back, so it retries; a refusal repeats, so it ends in an alert.",
                 "A transient failure (no answer, a 5xx) is retried for ever, with backoff, since the sink may be back "
                 "any moment; a permanent one (the sink answered and refused this item: a 409, another 4xx, an "
                 "untrusted ACK) counts toward --max-attempts, then the alert, since retrying will not fix the item. "
                 "See docs/operating.md, \"Operating it\"."),
                ("The outage lasted fewer than --max-attempts rounds; a longer one would have raised the same alert.",
                 "Rounds with no answer never count toward --max-attempts: the relay rode out {outage_failures} of them "
                 "and would ride out more. Only --give-up-after bounds an outage."),
                ("A conflict is the sink's own fault, so the relay stops to spare it; an outage is only the network's.",
                 "A conflict means the source holds another payload for an id the sink knows: a problem of the item, "
                 "whoever caused it. An outage is no smaller a problem; the age of the oldest pending item shows it."),
                ("The relay retries only idempotent requests, and a request once refused is no longer idempotent.",
                 "Both were the same idempotent POST under the same id. The difference is what the sink said: nothing "
                 "at all, or a refusal of this item."),
            ),
        ),
        "ja": Text(
            observed="倉庫が停止している間のリレーは、応答のないラウンドを{outage_failures}回、アラートなしで"
                     "リトライしてから配信しました。snack-7を毎回{refused_kind:term}として拒否する倉庫に対するリレーは、"
                     "{refused_count}回拒否されたところでアラートを出し（--max-attempts {refused_max}）、snack-7は"
                     "先頭に残りました。",
            question="リレーが、この2つの失敗で異なる扱いをしたのはなぜですか。",
            options=(
                ("応答がないのは倉庫が戻れば解消するのでリトライし、拒否は繰り返すのでアラートにする。",
                 "一時的な失敗（応答なし、5xx）は、倉庫がいつ戻ってもよいように、バックオフしながら無期限に"
                 "リトライします。永続的な失敗（倉庫が答えたうえでこの項目を拒否した。409、ほかの4xx、信頼できない"
                 "ACK）は、リトライしても項目は直らないので、--max-attemptsまで数えてアラートを出します。"
                 "docs/operating.ja.mdの「運用する」を参照してください。"),
                ("停止が--max-attempts回より短かっただけで、もっと長ければ同じアラートが出ていた。",
                 "応答のないラウンドは、--max-attemptsに数えません。この実行のリレーは、そうしたラウンドが"
                 "{outage_failures}回続いてもリトライを続けました。もっと多くても同じです。停止の長さに上限を"
                 "設けるのは--give-up-afterだけです。"),
                ("衝突は倉庫の落ち度なので、倉庫を守るために止まる。停止はネットワークの問題にすぎない。",
                 "衝突とは、倉庫が知っているIDについて、受付DBが別のペイロードを持っているということです。誰が起こしたか"
                 "に関係なく、項目の問題です。停止も小さな問題ではなく、最も古い未完了の経過時間に現れます。"),
                ("リレーは冪等なリクエストだけをリトライし、一度拒否されたリクエストはもう冪等ではない。",
                 "どちらも同じIDの、同じ冪等なPOSTでした。違いは倉庫の答えです。何も答えなかったのか、この項目を"
                 "拒否したのかです。"),
            ),
        ),
    }),
    # Alert, quarantine, fix, requeue; a quarantine is no success.
    Question("quarantine-is-not-success", {
        "en": Text(
            observed="conflict: the sink answered {conflict_body} and logged {conflict_deliveries:terms}; the relay "
                     "raised its alert after {refused_count} refusals, and snack-7 stayed at the head of the line.",
            question="The head item will never be accepted (a conflict, every time), and every item behind it "
                     "waits. What is the right procedure?",
            options=(
                ("Alert, quarantine it so the rest flows, fix it, requeue it; the quarantine stays an open incident.",
                 "A quarantined item is not delivered: it is an open incident, never a success, and the items that "
                 "overtake it are recorded. The alert came from the relay here, after {refused_count} refusals. See "
                 "docs/operating.md, \"Alert, quarantine, fix, requeue\"."),
                ("Keep retrying it with a short, fixed delay: the conflict may clear once the sink catches up.",
                 "A conflict is a permanent refusal: the sink holds another payload for this id and answers 409 every "
                 "time ({refused_count} times here). Retrying for ever blocks the line and alerts nobody."),
                ("Mark it sent by hand so that the line moves on, and write its id into a ticket for a later look.",
                 "The mark would record a delivery that never happened: the sink keeps the other payload. A quarantine "
                 "unblocks the line without the false record."),
                ("Delete the item and its order: a conflict shows that the event was never valid at all.",
                 "A conflict says two payloads share one id, not which of them is right. Deleting destroys the evidence "
                 "needed to find out."),
            ),
        ),
        "ja": Text(
            observed="conflictで、倉庫は{conflict_body}と答え、deliveriesに{conflict_deliveries:terms}を記録しました。"
                     "リレーは{refused_count}回拒否されたところでアラートを出し、snack-7はキューの先頭に残りました。",
            question="先頭の項目がいつまでも受け付けられず（毎回衝突になる）、その後ろの項目がすべて待っています。正しい"
                     "手順はどれですか。",
            options=(
                ("アラートを出し、隔離し、修正して再投入する。隔離は未解決の障害として残しておく。",
                 "隔離した項目は配信されたわけではなく、未解決の障害であって、決して成功ではありません。その項目を"
                 "追い越した項目も記録されます。この実行では、{refused_count}回拒否されたところでリレーがアラートを"
                 "出しました。docs/operating.ja.mdの「アラート・隔離・修正・再投入」を参照してください。"),
                ("短い一定の間隔でリトライを続ける。倉庫のデータが追いつけば、衝突は解消するかもしれない。",
                 "衝突は永続的な拒否です。倉庫はこのIDについて別のペイロードを持っていて、毎回409を返します（ここでは"
                 "{refused_count}回）。無限にリトライすると、キューが塞がれたまま、誰にもアラートが届きません。"),
                ("キューが進むように手作業で完了にし、IDはあとで調べるためにチケットに書いておく。",
                 "手作業で完了印を付けると、起きていない配信を記録することになります。倉庫には別のペイロードが残った"
                 "ままです。隔離なら、誤った記録を残さずにキューを進められます。"),
                ("項目と注文を削除する。衝突は、イベントがもともと無効だったことを示している。",
                 "衝突が示すのは、1つのIDを2つのペイロードが共有していることで、どちらが正しいかではありません。削除すると、"
                 "それを突き止めるための証拠が壊れます。"),
            ),
        ),
    }),
    # A cap and jitter on the retry wait: the kit's capped backoff, as this run's relay waited.
    Question("retry-wait-cap-and-jitter", {
        "en": Text(
            observed="a relay across a sink outage: after each of its {outage_failures} failed rounds it waited "
                     "{outage_waits} s (measured), each drawn at random below {outage_bounds} s, that is "
                     "min(--max-delay {outage_cap}, --base-delay {outage_base} * 2^(n-1)).",
            question="The lab asks for a cap and jitter on the retry wait. What do they do?",
            options=(
                ("The cap keeps the wait from growing for ever; jitter keeps relays that failed together out of step.",
                 "The cap bounds each wait, so a long outage is still tried at least every --max-delay and the relay "
                 "is back soon after the sink; full jitter draws each wait at random below that bound. Neither limits "
                 "the attempts: a transient failure is retried for ever. See docs/operating.md, \"Operating it\"."),
                ("The cap limits how many attempts come before the alert; jitter makes each attempt's timeout random.",
                 "The limit on attempts is --max-attempts, and it counts refusals only. The cap on the wait is "
                 "--max-delay: this run's waits stayed below {outage_cap} s."),
                ("Neither is needed: re-sending with the same id is safe, so retrying as fast as possible is best.",
                 "Safe is not free: a tight loop against a sink that is down burns CPU, and floods the sink the moment "
                 "it comes back."),
                ("The cap keeps the outbox table small; jitter spreads the relay's log lines so they are easy to read.",
                 "Neither touches the table or the log: both decide only when the next attempt is made."),
            ),
        ),
        "ja": Text(
            observed="倉庫が停止している間のリレーは、{outage_failures}回の失敗のあと、それぞれ{outage_waits}秒"
                     "待ちました（実測）。n回目の待ち時間は、上限 min(--max-delay {outage_cap}, --base-delay "
                     "{outage_base} * 2^(n-1))、つまり順に{outage_bounds}秒を下回る範囲から、ランダムに選ばれました。",
            question="ラボは、リトライの待機に上限とジッターが必要だと言っています。それぞれ何のためのものですか。",
            options=(
                ("上限は待ち時間が際限なく伸びるのを防ぎ、ジッターはリトライが一斉に起こるのを防ぐ。",
                 "上限が1回の待ち時間を抑えるので、停止が長引いても少なくとも--max-delayごとに試し、倉庫が戻れば"
                 "リレーもすぐに戻ります。ジッターは、その上限未満から待ち時間をランダムに選びます。"
                 "どちらも試行の回数は制限しません。一時的な失敗は無期限にリトライします。docs/operating.ja.mdの「運用する」"
                 "を参照してください。"),
                ("上限はアラートまでの試行回数を決め、ジッターは試行ごとのタイムアウトをランダムにする。",
                 "試行回数の上限は--max-attemptsで、数えるのは拒否だけです。待機の上限は--max-delayで、この実行の"
                 "待ち時間は{outage_cap}秒未満に収まりました。"),
                ("どちらも要らない。同じIDでの再送は安全なので、できるだけ速くリトライするのが最善である。",
                 "安全でもコストはかかります。止まっている倉庫に休みなくリトライするとCPUを使い続け、倉庫が戻った"
                 "瞬間にリクエストが殺到します。"),
                ("上限はoutboxのテーブルを小さく保ち、ジッターはリレーのログを読みやすく間引く。",
                 "どちらもテーブルにもログにも関係しません。決めるのは、次の試行をいつ行うかだけです。"),
            ),
        ),
    }),
)

LETTERS = "abcdefgh"


def flatten(questions):
    """{lang: {message id: text}}: "quiz.<id>.observed", ".question", ".choice.<letter>", ".why.<letter>".

    The letters are those of the bank, where the right option is "a"; quiz.py shows them shuffled.
    """
    tables = {}
    for question in questions:
        for lang, text in question.texts.items():
            table = tables.setdefault(lang, {})
            prefix = "quiz.%s." % question.id
            table[prefix + "observed"] = text.observed
            table[prefix + "question"] = text.question
            for letter, (choice, why) in zip(LETTERS, text.options):
                table[prefix + "choice." + letter] = choice
                table[prefix + "why." + letter] = why
    return tables


QUIZ_TEXT = flatten(QUESTIONS)
